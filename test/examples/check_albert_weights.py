"""Checks the weights examples/albert_pretrain wrote (--out) with Python's standard library alone,
apart from ptrain's reader: a well-formed safetensors file (its header, each tensor's byte range
its F32 shape's and the ranges tiling the data), holding exactly the tensors HuggingFace's
AlbertForPreTraining.save_pretrained writes (the tied predictions.decoder.* left out) in the shapes of
the configuration given, every value finite.

usage: check_albert_weights.py FILE VOCAB EMBEDDING HIDDEN FFN POSITIONS"""
import json
import math
import struct
import sys


def expected_shapes(vocab, e, h, ffn, positions):
    layer = "albert.encoder.albert_layer_groups.0.albert_layers.0."
    shapes = {
        "albert.embeddings.word_embeddings.weight": [vocab, e],
        "albert.embeddings.position_embeddings.weight": [positions, e],
        "albert.embeddings.token_type_embeddings.weight": [2, e],
        "albert.embeddings.LayerNorm.weight": [e], "albert.embeddings.LayerNorm.bias": [e],
        "albert.encoder.embedding_hidden_mapping_in.weight": [h, e],
        "albert.encoder.embedding_hidden_mapping_in.bias": [h],
        layer + "ffn.weight": [ffn, h], layer + "ffn.bias": [ffn],
        layer + "ffn_output.weight": [h, ffn], layer + "ffn_output.bias": [h],
        "albert.pooler.weight": [h, h], "albert.pooler.bias": [h],
        "predictions.bias": [vocab], "predictions.dense.weight": [e, h], "predictions.dense.bias": [e],
        "predictions.LayerNorm.weight": [e], "predictions.LayerNorm.bias": [e],
        "sop_classifier.classifier.weight": [2, h], "sop_classifier.classifier.bias": [2],
    }
    for norm in ("full_layer_layer_norm", "attention.LayerNorm"):
        shapes[layer + norm + ".weight"] = [h]
        shapes[layer + norm + ".bias"] = [h]
    for linear in ("query", "key", "value", "dense"):
        shapes[layer + "attention." + linear + ".weight"] = [h, h]
        shapes[layer + "attention." + linear + ".bias"] = [h]
    return shapes


def main():
    path = sys.argv[1]
    want = expected_shapes(*map(int, sys.argv[2:7]))
    data = open(path, "rb").read()
    (header_size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_size])
    header.pop("__metadata__", None)
    body = data[8 + header_size:]
    errors = []
    if set(header) != set(want):
        errors.append(f"names: missing {sorted(set(want) - set(header))}, unexpected {sorted(set(header) - set(want))}")
    end = 0
    for name, info in sorted(header.items(), key=lambda item: item[1]["data_offsets"][0]):
        begin, stop = info["data_offsets"]
        count = math.prod(info["shape"])
        if info["dtype"] != "F32" or begin != end or stop - begin != 4 * count:
            errors.append(f"{name}: {info} does not follow the previous tensor's end {end} as F32")
        if name in want and info["shape"] != want[name]:
            errors.append(f"{name}: shape {info['shape']}, expected {want[name]}")
        if not all(math.isfinite(v) for v in struct.unpack(f"<{count}f", body[begin:stop])):
            errors.append(f"{name}: a value is not finite")
        end = stop
    if end != len(body):
        errors.append(f"the tensors end at byte {end} of the {len(body)} after the header")
    if errors:
        sys.exit(path + ":\n  " + "\n  ".join(errors))
    print(f"{path}: {len(header)} tensors under HuggingFace's names, shapes as configured, values finite")


if __name__ == "__main__":
    main()
