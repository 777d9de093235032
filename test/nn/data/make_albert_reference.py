# Writes the PyTorch side of test/nn/albert_test.cpp (the test does not run Python), from
# HuggingFace transformers' AlbertForPreTraining of a small configuration (vocabulary 23, E 6,
# H 8, 3 applications of the shared layer, 2 heads, FFN 12, 16 positions), in eval mode:
#   albert_weights.safetensors    its state_dict() as safetensors.torch.save_file writes it, the
#                                 tied names predictions.decoder.{weight,bias} included
#   albert_reference.safetensors  a batch of 3 sequences of 7 tokens, two of them padded
#                                 (input_ids, token_type_ids, attention_mask, labels with -100
#                                 where not masked, sentence_order_label, as float), both heads'
#                                 logits (prediction_logits, sop_logits), the loss and the gradient
#                                 of every parameter (grad.<name>, named_parameters()' names)
# Run from this directory with an interpreter that has torch, transformers and safetensors (torch
# 1.13 and transformers 4.40.2 wrote the committed files):
#   python make_albert_reference.py
import torch
from safetensors.torch import save_file
from transformers import AlbertConfig, AlbertForPreTraining


def main():
    torch.manual_seed(0)
    config = AlbertConfig(vocab_size=23, embedding_size=6, hidden_size=8, num_hidden_layers=3, num_attention_heads=2,
                          intermediate_size=12, max_position_embeddings=16, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.1,
                          # Weights of 0.3 make activations of order 1, where the erf GELU or
                          # LayerNorm's eps 1e-5 would move gradients by more than the test's 1e-4
                          # (at 0.02 the erf GELU stays within 4e-5).
                          initializer_range=0.3)
    model = AlbertForPreTraining(config)
    # LayerNorm's ones and the zero biases would leave parts of the backward untested.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    model.eval()
    # Tied names share storage, which save_file refuses: each is written as a copy.
    save_file({k: v.clone().contiguous() for k, v in model.state_dict().items()}, "albert_weights.safetensors",
              metadata={"format": "pt"})

    batch, length = 3, 7
    input_ids = torch.randint(1, config.vocab_size, (batch, length))
    token_type_ids = torch.zeros(batch, length, dtype=torch.long)
    token_type_ids[:, 4:] = 1
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    attention_mask[1, 5:] = 0
    attention_mask[2, 3:] = 0
    input_ids[attention_mask == 0] = config.pad_token_id
    labels = torch.full((batch, length), -100, dtype=torch.long)
    for b, s in [(0, 1), (0, 5), (1, 2), (2, 0), (2, 2)]:
        labels[b, s] = torch.randint(0, config.vocab_size, ()).item()
    sentence_order_label = torch.tensor([0, 1, 1])

    out = model(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask, labels=labels,
                sentence_order_label=sentence_order_label)
    out.loss.backward()
    reference = {"input_ids": input_ids.float(), "token_type_ids": token_type_ids.float(),
                 "attention_mask": attention_mask.float(), "labels": labels.float(),
                 "sentence_order_label": sentence_order_label.float(),
                 "prediction_logits": out.prediction_logits.detach(), "sop_logits": out.sop_logits.detach(),
                 "loss": out.loss.detach().reshape(1)}
    for name, p in model.named_parameters():
        reference["grad." + name] = p.grad
    save_file({k: v.contiguous() for k, v in reference.items()}, "albert_reference.safetensors",
              metadata={"torch": torch.__version__})
    print("torch", torch.__version__, "loss", out.loss.item())


if __name__ == "__main__":
    main()
