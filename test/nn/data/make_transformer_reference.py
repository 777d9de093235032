# Writes the PyTorch side of test/nn/transformer_parity_test.cpp (the test does not run Python):
#   transformer_lm_weights.safetensors  the state_dict of PyTorch's tutorial TransformerModel
#                                       (ntoken 11, ninp 8, nhead 2, nhid 16, nlayers 2), as
#                                       safetensors.torch.save_file writes it
#   transformer_reference.safetensors   its tokens, targets, eval-mode logits under the causal
#                                       mask, cross-entropy loss and every parameter's gradient;
#                                       and a batch-first, norm_first, gelu TransformerEncoderLayer
#                                       (weights under "layer.*") with a key-padding mask: its
#                                       input, output and the gradients of input and parameters
# Run from this directory with an interpreter that has torch and safetensors:
#   python make_transformer_reference.py
# bench/torch_lm_peer.py imports the tutorial's model from here.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# The tutorial's model (word_language_model / transformer_tutorial, before its 2023 renames).
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[: x.size(0), :]
        return self.dropout(x)


class TransformerModel(nn.Module):
    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super().__init__()
        self.model_type = "Transformer"
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        encoder_layers = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers, enable_nested_tensor=False)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        initrange = 0.1
        self.encoder.weight.data.uniform_(-initrange, initrange)
        self.decoder.bias.data.zero_()
        self.decoder.weight.data.uniform_(-initrange, initrange)

    def forward(self, src, src_mask):
        src = self.encoder(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        output = self.transformer_encoder(src, src_mask)
        return self.decoder(output)


def square_subsequent_mask(sz):
    mask = (torch.triu(torch.ones(sz, sz)) == 1).transpose(0, 1)
    return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, float(0.0))


def perturb(module):
    # LayerNorm's ones and the zero biases would leave parts of the backward untested.
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.1 * torch.randn_like(p))


def main():
    from safetensors.torch import save_file  # only the generator needs it, not bench/torch_lm_peer.py

    torch.manual_seed(0)
    ntoken, seq, batch = 11, 7, 3
    model = TransformerModel(ntoken, 8, 2, 16, 2, dropout=0.2)
    perturb(model)
    model.eval()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, "transformer_lm_weights.safetensors",
              metadata={"format": "pt"})

    tokens = torch.randint(0, ntoken, (seq, batch))
    targets = torch.randint(0, ntoken, (seq * batch,))
    logits = model(tokens, square_subsequent_mask(seq))
    loss = F.cross_entropy(logits.view(-1, ntoken), targets)
    loss.backward()
    out = {"tokens": tokens.float(), "targets": targets.float(), "logits": logits.detach(),
           "loss": loss.detach().reshape(1)}
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad

    layer = nn.TransformerEncoderLayer(6, 3, 10, dropout=0.1, activation="gelu", batch_first=True, norm_first=True)
    perturb(layer)
    layer.eval()
    x = torch.randn(2, 5, 6, requires_grad=True)
    padding = torch.tensor([[False, False, False, True, True], [False, False, False, False, False]])
    y = layer(x, src_key_padding_mask=padding)
    grad_y = torch.randn_like(y)
    y.backward(grad_y)
    out["layer.input"] = x.detach()
    out["layer.key_padding"] = padding.float()
    out["layer.output"] = y.detach()
    out["layer.grad_output"] = grad_y
    out["layer.grad_input"] = x.grad
    for name, p in layer.named_parameters():
        out["layer." + name] = p.detach()
        out["layer.grad." + name] = p.grad
    save_file({k: v.contiguous() for k, v in out.items()}, "transformer_reference.safetensors",
              metadata={"torch": torch.__version__})
    print("torch", torch.__version__, "loss", loss.item())


if __name__ == "__main__":
    main()
