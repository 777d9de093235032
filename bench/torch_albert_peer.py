#!/usr/bin/python3
"""The PyTorch peer of bench/albert_pretrain: one pre-training step of ALBERT (HuggingFace
transformers' AlbertForPreTraining when it imports, otherwise the same architecture written below:
factorised embedding, one post-LayerNorm layer shared by every application, gelu_new, the tied MLM
decoder, the SOP classifier), the loss HuggingFace computes (MLM cross entropy over the labelled
tokens plus SOP cross entropy), backward, and a LAMB step (test/optim/torch_lamb.py, the reference
of ptrain's Lamb tests) with weight decay skipping LayerNorm and biases. Timed as the C++ side (median of the timed steps after warm-up).
Prints one JSON line.

usage: torch_albert_peer.py THREADS VOCAB EMBEDDING HIDDEN LAYERS HEADS FFN BATCH LENGTH WARMUP STEPS"""
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "optim"))
from torch_lamb import Lamb  # noqa: E402


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Layer(nn.Module):
    """AlbertLayer: self-attention, residual, LayerNorm; FFN (gelu_new), residual, LayerNorm."""

    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.dense = nn.Linear(hidden, hidden)
        self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.ffn = nn.Linear(hidden, ffn)
        self.ffn_output = nn.Linear(ffn, hidden)
        self.full_layer_layer_norm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, h):
        n, s, hidden = h.shape

        def split(x):
            return x.view(n, s, self.heads, hidden // self.heads).transpose(1, 2)

        q, k, v = split(self.query(h)), split(self.key(h)), split(self.value(h))
        scores = q @ k.transpose(-1, -2) / math.sqrt(hidden // self.heads)
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(n, s, hidden)
        a = self.attention_norm(h + self.dense(context))
        return self.full_layer_layer_norm(self.ffn_output(gelu_new(self.ffn(a))) + a)


class Albert(nn.Module):
    """AlbertForPreTraining's computation without padding: returns (MLM logits, SOP logits)."""

    def __init__(self, vocab, embedding, hidden, layers, heads, ffn, length):
        super().__init__()
        self.layers = layers
        self.word_embeddings = nn.Embedding(vocab, embedding, padding_idx=0)
        self.position_embeddings = nn.Embedding(length, embedding)
        self.token_type_embeddings = nn.Embedding(2, embedding)
        self.embedding_norm = nn.LayerNorm(embedding, eps=1e-12)
        self.embedding_hidden_mapping_in = nn.Linear(embedding, hidden)
        self.shared_layer = Layer(hidden, heads, ffn)
        self.pooler = nn.Linear(hidden, hidden)
        self.mlm_dense = nn.Linear(hidden, embedding)
        self.mlm_norm = nn.LayerNorm(embedding, eps=1e-12)
        self.mlm_bias = nn.Parameter(torch.zeros(vocab))
        self.sop_dropout = nn.Dropout(0.1)
        self.sop_classifier = nn.Linear(hidden, 2)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                m.weight.data.normal_(0.0, 0.02)
            if isinstance(m, nn.Linear):
                m.bias.data.zero_()

    def forward(self, input_ids, token_type_ids):
        positions = torch.arange(input_ids.shape[1])
        e = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids) + \
            self.position_embeddings(positions)
        h = self.embedding_hidden_mapping_in(self.embedding_norm(e))
        for _ in range(self.layers):
            h = self.shared_layer(h)
        mlm = self.mlm_norm(gelu_new(self.mlm_dense(h))) @ self.word_embeddings.weight.t() + self.mlm_bias
        pooled = torch.tanh(self.pooler(h[:, 0]))
        return mlm, self.sop_classifier(self.sop_dropout(pooled))


# As optim/lamb.hpp's decays_weight: no decay for LayerNorm (HuggingFace's "LayerNorm", this
# script's "norm") nor any bias.
def decays(name):
    return not (name.endswith("bias") or "LayerNorm" in name or "norm" in name)


def main():
    threads, vocab, embedding, hidden, layers, heads, ffn, batch, length, warmup, steps = map(int, sys.argv[1:12])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    try:
        from transformers import AlbertConfig, AlbertForPreTraining
        config = AlbertConfig(vocab_size=vocab, embedding_size=embedding, hidden_size=hidden,
                              num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=ffn,
                              max_position_embeddings=length, hidden_act="gelu_new", hidden_dropout_prob=0.0,
                              attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.1)
        model, impl = AlbertForPreTraining(config).train(), "transformers"
    except ImportError:
        model, impl = Albert(vocab, embedding, hidden, layers, heads, ffn, length).train(), "script"
    input_ids = torch.randint(5, vocab, (batch, length))
    token_type_ids = torch.zeros(batch, length, dtype=torch.long)
    token_type_ids[:, length // 2:] = 1
    labels = torch.full((batch, length), -100, dtype=torch.long)
    chosen = torch.rand(batch, length) < 0.15
    labels[chosen] = input_ids[chosen]
    sop = torch.randint(0, 2, (batch,))
    opt = Lamb(model.parameters(), lr=1e-3, no_decay=[p for n, p in model.named_parameters() if not decays(n)])
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if impl == "transformers":
            loss = model(input_ids=input_ids, token_type_ids=token_type_ids, labels=labels,
                         sentence_order_label=sop).loss
        else:
            mlm, sop_logits = model(input_ids, token_type_ids)
            loss = F.cross_entropy(mlm.view(-1, vocab), labels.view(-1)) + F.cross_entropy(sop_logits, sop)
        loss.backward()
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    parameters = sum(p.numel() for p in model.parameters())
    print(json.dumps({"model": "albert_pretrain", "impl": impl, "parameters": parameters, "median_s": median,
                      "sequences_per_sec": batch / median, "torch": torch.__version__,
                      "threads": torch.get_num_threads()}), flush=True)


if __name__ == "__main__":
    main()
