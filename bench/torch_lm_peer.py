#!/usr/bin/python3
"""The PyTorch peer of bench/transformer_lm: the transformer tutorial's TransformerModel (Embedding
* sqrt(emsize), sinusoidal PositionalEncoding, nn.TransformerEncoder of post-norm relu layers, a
Linear decoder, a causal mask), one training step as the tutorial's train(): cross entropy over
the vocabulary, backward, clip_grad_norm_(0.5), SGD at lr 5.0. Timed as the C++ side (median of
the timed steps after warm-up). Prints one JSON line.

usage: torch_lm_peer.py THREADS NTOKEN EMSIZE NHID NLAYERS NHEAD BPTT BATCH WARMUP STEPS"""
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))

    def forward(self, x):
        return self.dropout(x + self.pe[:x.size(0), :])


class TransformerModel(nn.Module):
    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.2):
        super().__init__()
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        layer = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        self.encoder.weight.data.uniform_(-0.1, 0.1)
        self.decoder.bias.data.zero_()
        self.decoder.weight.data.uniform_(-0.1, 0.1)

    def forward(self, src, src_mask):
        src = self.encoder(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        return self.decoder(self.transformer_encoder(src, src_mask))


def main():
    threads, ntoken, emsize, nhid, nlayers, nhead, bptt, batch, warmup, steps = map(int, sys.argv[1:11])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = TransformerModel(ntoken, emsize, nhead, nhid, nlayers).train()
    data = torch.randint(0, ntoken, (bptt, batch))
    targets = torch.randint(0, ntoken, (bptt * batch,))
    mask = torch.triu(torch.full((bptt, bptt), float("-inf")), diagonal=1)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=5.0)
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = criterion(model(data, mask).view(-1, ntoken), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print(json.dumps({"model": "transformer_lm", "median_s": median, "tokens_per_sec": bptt * batch / median,
                      "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
