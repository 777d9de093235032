#!/usr/bin/python3
"""The PyTorch peer of bench/transformer_lm: the transformer tutorial's TransformerModel (Embedding
* sqrt(emsize), sinusoidal PositionalEncoding, nn.TransformerEncoder of post-norm relu layers, a
Linear decoder, a causal mask), one training step as the tutorial's train(): cross entropy over
the vocabulary, backward, clip_grad_norm_(0.5), SGD at lr 5.0. Timed as the C++ side (median of
the timed steps after warm-up). Prints one JSON line.

usage: torch_lm_peer.py THREADS NTOKEN EMSIZE NHID NLAYERS NHEAD BPTT BATCH WARMUP STEPS"""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn

# The tutorial's model, as the parity test's generator writes it.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "nn", "data"))
from make_transformer_reference import TransformerModel  # noqa: E402


def main():
    threads, ntoken, emsize, nhid, nlayers, nhead, bptt, batch, warmup, steps = map(int, sys.argv[1:11])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = TransformerModel(ntoken, emsize, nhead, nhid, nlayers, dropout=0.2).train()
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
                      "torch": torch.__version__, "threads": torch.get_num_threads()}), flush=True)


if __name__ == "__main__":
    main()
