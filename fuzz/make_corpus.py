#!/usr/bin/env python3
"""Writes the seed corpus fuzz/corpus/<target>/: small valid files in each real format, and a few
corrupt ones (the JPEGs through make_jpeg_seeds.cpp, built with g++ and libjpeg). The seeds are
committed; this is only needed to change them."""
import gzip
import json
import os
import struct
import subprocess
import tempfile
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    os.makedirs(os.path.join(ROOT, target), exist_ok=True)
    with open(os.path.join(ROOT, target, name), "wb") as f:
        f.write(data)


def idx(dims, payload):
    return struct.pack(">I", 0x0800 | len(dims)) + b"".join(struct.pack(">I", d) for d in dims) + payload


def idx_seeds():
    images = idx([2, 3, 4], bytes(range(24)))
    labels = idx([5], bytes([0, 1, 9, 3, 4]))
    for target, wrap in (("idx", lambda b: b), ("idx_gzip", lambda b: b)):
        put(target, "images.idx3", wrap(images))
        put(target, "labels.idx1", wrap(labels))
        put(target, "truncated.idx3", images[:20])
        put(target, "bad_label.idx1", idx([2], bytes([3, 200])))
        put(target, "huge_count.idx3", idx([0xFFFFFFFF, 0xFFFF, 0xFFFF], b"\0" * 8))
    # The plain target also sees gzip streams as stored on disk, valid and cut short.
    put("idx", "images.idx3.gz", gzip.compress(images, mtime=0))
    put("idx", "labels.idx1.gz", gzip.compress(labels, mtime=0))
    put("idx", "truncated.idx3.gz", gzip.compress(images, mtime=0)[:30])


def cifar_seeds():
    record = lambda label, v: bytes([label]) + bytes((v + i) % 256 for i in range(3072))
    put("cifar10", "one_record.bin", record(3, 0))
    put("cifar10", "two_records.bin", record(0, 7) + record(9, 100))
    put("cifar10", "truncated.bin", record(1, 5)[:1000])
    put("cifar10", "bad_label.bin", record(10, 0))


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(width, height, bit_depth, color_type, rows, palette=None, trns=None, interlace=0):
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, interlace))
    if palette:
        out += png_chunk(b"PLTE", palette)
    if trns:
        out += png_chunk(b"tRNS", trns)
    out += png_chunk(b"IDAT", zlib.compress(b"".join(b"\0" + r for r in rows)))
    return out + png_chunk(b"IEND", b"")


def png_seeds():
    seeds = {
        "gray8.png": png(3, 2, 8, 0, [bytes([0, 128, 255]), bytes([1, 2, 3])]),
        "gray1.png": png(8, 2, 1, 0, [b"\xa5", b"\x5a"]),
        "gray_alpha.png": png(2, 2, 8, 4, [bytes([1, 255, 2, 0]), bytes([3, 9, 4, 7])]),
        "rgb8.png": png(2, 2, 8, 2, [bytes(range(6)), bytes(range(6, 12))]),
        "rgb16.png": png(1, 2, 16, 2, [bytes(range(6)), bytes(range(6, 12))]),
        "rgba8.png": png(2, 1, 8, 6, [bytes(range(8))]),
        "palette4.png": png(4, 2, 4, 3, [b"\x01\x20", b"\x12\x00"], palette=bytes(range(9)), trns=b"\x80"),
        "palette8.png": png(2, 2, 8, 3, [b"\x00\x01", b"\x02\x00"], palette=bytes(range(9))),
    }
    rgb = seeds["rgb8.png"]
    seeds["truncated.png"] = rgb[: len(rgb) - 20]
    seeds["huge_header.png"] = png(100000, 100000, 8, 2, [b""])
    for name, data in seeds.items():
        put("png", name, data)
    return seeds


def jpeg_seeds():
    with tempfile.TemporaryDirectory() as tmp:
        tool = os.path.join(tmp, "make_jpeg_seeds")
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run(["g++", "-O1", os.path.join(here, "make_jpeg_seeds.cpp"), "-o", tool, "-ljpeg"], check=True)
        subprocess.run([tool, tmp], check=True)
        seeds = {}
        for name in sorted(os.listdir(tmp)):
            if name.endswith(".jpeg"):
                with open(os.path.join(tmp, name), "rb") as f:
                    seeds[name] = f.read()
    seeds["truncated.jpeg"] = seeds["rgb.jpeg"][: len(seeds["rgb.jpeg"]) // 2]
    for name, data in seeds.items():
        put("jpeg", name, data)
    return seeds


def image_csv_seeds():
    put("image_csv", "valid.csv", b"image,level\na,0\nb,4\n")
    put("image_csv", "quoted_bom_crlf.csv", b'\xef\xbb\xbf"level","image"\r\n"1","b"\r\n\r\n2,a\r\n')
    put("image_csv", "missing_image.csv", b"image,level\nc,1\n")
    put("image_csv", "bad_label.csv", b"image,level\na,-1\n")
    put("image_csv", "header_only.csv", b"image,level\n")


def image_mask_seeds(pngs, jpegs):
    def pair(options, image, mask):
        return bytes([options]) + struct.pack("<H", len(image)) + image + mask

    gray_mask = png(3, 2, 8, 0, [bytes([0, 1, 2]), bytes([2, 1, 0])])
    binary_mask = png(3, 2, 8, 0, [bytes([0, 255, 0]), bytes([255, 255, 0])])
    put("image_mask", "class_index.bin", pair(3 << 1, pngs["gray8.png"], gray_mask))
    put("image_mask", "binary.bin", pair(1, pngs["gray8.png"], binary_mask))
    put("image_mask", "palette_mask.bin", pair(0, pngs["rgb8.png"], pngs["palette8.png"]))
    put("image_mask", "rgb_mask.bin", pair(0, pngs["rgb8.png"], pngs["rgb8.png"]))
    put("image_mask", "jpeg_image.bin", pair(0, jpegs["gray.jpeg"], gray_mask))
    put("image_mask", "size_mismatch.bin", pair(0, pngs["rgb16.png"], gray_mask))


def safetensors(header, data):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    put("safetensors", "two_tensors.safetensors", safetensors(
        {"__metadata__": {"format": "pt"},
         "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
         "b": {"dtype": "F16", "shape": [2], "data_offsets": [16, 20]}},
        struct.pack("<4f", 1, -2, 3.5, 0) + b"\x00\x3c\x00\xc0"))
    put("safetensors", "dtypes.safetensors", safetensors(
        {"d": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]},
         "i": {"dtype": "I64", "shape": [1], "data_offsets": [8, 16]},
         "h": {"dtype": "BF16", "shape": [1, 1], "data_offsets": [16, 18]},
         "e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [18, 18]}},
        struct.pack("<dq", 2.5, -7) + b"\x80\x3f"))
    put("safetensors", "overlap.safetensors", safetensors(
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
         "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8))
    put("safetensors", "escapes.safetensors", safetensors(
        {"t\u00e9\\n\"": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}}, b"\0" * 4))
    put("safetensors", "huge_length.safetensors", struct.pack("<Q", 1 << 62) + b"{}")


def cache(inputs, maps, records):
    return (b"PTRCACHE" + struct.pack("<IIIQ", 1, len(inputs), len(maps), len(records))
            + b"".join(struct.pack("<q", e) for e in inputs + maps) + b"".join(records))


def tensor_cache_seeds():
    put("tensor_cache", "classes.cache", cache([1, 2, 2], [], [
        struct.pack("<4fq", 0, 0.25, 0.5, 1, 3), struct.pack("<4fq", 1, 1, 0, 0, 7)]))
    put("tensor_cache", "maps.cache", cache([2, 1], [1, 2], [struct.pack("<2f2q", 0.5, 0.5, 0, 1)]))
    put("tensor_cache", "truncated.cache", cache([3], [], [struct.pack("<3fq", 1, 2, 3, 0)])[:-5])
    put("tensor_cache", "huge_count.cache", cache([1 << 32, 1 << 32], [], [])[:28])


def checkpoint_seeds():
    manifest = ("ptrain-checkpoint 1\nstep 12\nepoch 1\nbatch_in_epoch 4\nscheduler_step 12\nworld_size 2\n"
                "parts 1\nmodel_tensors 10\noptimizer 1\npolicies 0\nmetric_name accuracy\nmetric 0.75\n"
                "best 0.8125\n")
    put("checkpoint_manifest", "manifest.txt", manifest.encode())
    put("checkpoint_manifest", "truncated.txt", manifest[:70].encode())
    put("checkpoint_manifest", "mid_epoch.txt",
        manifest.replace("metric_name accuracy", "metric_name -").replace("metric 0.75", "metric nan").encode())
    # std::mt19937_64 as libstdc++ writes it: 312 words of state, then the position.
    state = " ".join(str((6364136223846793005 * i + 1442695040888963407) % (1 << 64)) for i in range(312))
    put("checkpoint_rank_state", "rank-0.txt", f"rng {state} 312\ntotals 3.5 12 12 9 12\n".encode())
    put("checkpoint_rank_state", "no_totals.txt", f"rng {state} 312\n".encode())
    put("checkpoint_rank_state", "short_state.txt", b"rng 1 2 3\ntotals 1\n")


def wikitext_seeds():
    article = (" \n = Valkyria Chronicles III = \n \n Senjō no Valkyria 3 : <unk> Chronicles ( Japanese : 戦場のヴァルキュリア3 , "
               "lit . Valkyria of the Battlefield 3 ) , is a tactical role @-@ playing video game . \n \n"
               " = = Gameplay = = \n \n It 's \"ÉCOLE\" İstanbul<br />x ; y : z ! ? \n")
    put("wikitext", "article.tokens", article.encode())
    put("wikitext", "crlf.tokens", article.replace("\n", "\r\n").encode())
    put("wikitext", "latin1.tokens", " = Café = \n".encode("latin-1"))
    put("wikitext", "blank.tokens", b" \n \n\t\n")
    put("wikitext", "one_token.tokens", b"<unk>")


def wordpiece_seeds():
    specials = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"
    put("wordpiece", "vocab.txt", (specials + "the\n##s\nun\n##aff\n##able\né\n中\n.\n").encode())
    put("wordpiece", "crlf_vocab.txt", (specials + "ÉCOLE\n##s\n").replace("\n", "\r\n").encode())
    put("wordpiece", "no_mask.txt", b"[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")
    put("wordpiece", "twice.txt", (specials + "the\nthe\n").encode())
    put("wordpiece", "article.raw", " = A = \n The the a . A aab !\n = = B = = \n é 中 . a\n = C = \n the\n".encode())
    put("wordpiece", "text.txt", "The UNaffable ÉCOLE's [MASK] 中国 na\u00efve\u00a0x\u0000y\u200b!".encode())


if __name__ == "__main__":
    idx_seeds()
    cifar_seeds()
    pngs = png_seeds()
    jpegs = jpeg_seeds()
    image_csv_seeds()
    image_mask_seeds(pngs, jpegs)
    safetensors_seeds()
    tensor_cache_seeds()
    checkpoint_seeds()
    wikitext_seeds()
    wordpiece_seeds()
