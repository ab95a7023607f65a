"""make_seeds.py CORPUS_DIR: the seeds fuzz/make_seeds.sh cannot make with the project's writers.

- rdata/: R lazy-load databases (index + data, joined as fuzz/fuzz_util.h split_two expects),
  written from R's XDR serialisation format (the same layout tests/test_corpus.cpp builds).
- gpt2_files/: a small GPT-2 encoder.json + vocab.bpe pair.
- cli/: argument lists of the `landmark` program, NUL-separated.
- unchecked copies of the checkpoints and token files make_seeds.sh wrote: checkpoints without
  __metadata__["crc32"] and ["header_crc32"], and without the header's alone (as written before
  it had one), and a version-1 token file (all still read, unverified), so that byte mutations
  reach the code past the checksums instead of stopping at a CRC mismatch.
"""
import gzip
import json
import struct
import sys
import zlib
from pathlib import Path

SYM, LIST, CHAR, LGL, INT, STR, VEC, NIL, REF = 1, 2, 9, 10, 13, 16, 19, 254, 255
ATTR, TAG, ASCII = 1 << 9, 1 << 10, 64 << 12


class Xdr:
    def __init__(self):
        self.b = bytearray()

    def i32(self, v):
        self.b += struct.pack(">i", v if v < 2**31 else v - 2**32)
        return self

    def raw(self, s):
        self.b += s
        return self

    def header_v3(self):
        return self.raw(b"X\n").i32(3).i32(0x040201).i32(0x030500).i32(5).raw(b"UTF-8")

    def chars(self, s):
        return self.i32(CHAR | ASCII).i32(len(s)).raw(s)

    def strs(self, items):
        self.i32(STR).i32(len(items))
        for s in items:
            self.chars(s)
        return self


def two_part(first, second):
    assert len(first) < 65536
    return struct.pack("<H", len(first)) + first + second


def rdata(compressed, entries=None, bomb=b""):
    """An index + data pair. entries: name -> serialised object (default: two short novels);
    bomb: bytes the first entry's zlib stream holds beyond the length its header promises."""
    if entries is None:
        entries = {n: bytes(Xdr().header_v3().strs([n + b" line 1", b"", n + b" end"]).b)
                   for n in [b"emma", b"persuasion"]}
    names = list(entries)
    rdb, where = b"", []
    for i, n in enumerate(names):
        blob = entries[n]
        stream = zlib.compress(blob + (bomb if i == 0 else b""))
        entry = struct.pack(">I", len(blob)) + stream if compressed else blob
        where.append((len(rdb), len(entry)))
        rdb += entry
    x = Xdr().header_v3().i32(VEC | ATTR).i32(3)
    x.i32(VEC | ATTR).i32(len(names))
    for off, ln in where:
        x.i32(INT).i32(2).i32(off).i32(ln)
    x.i32(LIST | TAG).i32(SYM).chars(b"names").strs(names).i32(NIL)
    x.i32(VEC).i32(0)
    x.i32(LGL).i32(1).i32(1 if compressed else 0)
    x.i32(LIST | TAG).i32((1 << 8) | REF).strs([b"variables", b"references", b"compressed"]).i32(NIL)
    rdx = bytes(x.b)
    return two_part(gzip.compress(rdx, mtime=0) if compressed else rdx, rdb)


def rdata_hostile():
    """Seeds at the reader's bounds (docs/reliability.md): a zlib bomb (4 MiB of zeros past the
    promised length), objects nested 5,000 deep, and a pairlist of 3,000 cells whose tags name a
    100 KB symbol by reference. Each is refused; mutations of them probe around the checks."""
    nested = Xdr().header_v3()
    for _ in range(5000):
        nested.i32(VEC).i32(1)
    tags = Xdr().header_v3().i32(LIST | TAG).i32(SYM).chars(b"n" * 100000).i32(NIL)
    for _ in range(2999):
        tags.i32(LIST | TAG).i32((1 << 8) | REF).i32(NIL)
    plain = bytes(Xdr().header_v3().strs([b"emma"]).b)
    return {
        "hostile_bomb.bin": rdata(True, {b"emma": plain}, bomb=bytes(4 << 20)),
        "hostile_nested.bin": rdata(True, {b"emma": bytes(nested.i32(NIL).b)}),
        "hostile_tags.bin": rdata(True, {b"emma": bytes(tags.i32(NIL).b)}),
    }


def byte_to_unicode():
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def gpt2_files():
    m = byte_to_unicode()
    enc = {m[b]: b for b in range(256)}
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("1", "2"), ("12", "3")]
    for left, right in merges:
        enc[left + right] = len(enc)
    enc["<|endoftext|>"] = len(enc)
    bpe = "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges)
    return two_part(json.dumps(enc, ensure_ascii=False).encode(), bpe.encode())


CLI = [
    ["train", "--data", "d", "--out", "o", "--steps", "5", "--batch", "2", "--lr", "1e-3"],
    ["train", "--data", "d", "--out", "o", "--attention", "landmark", "--landmark-every", "50", "--cmt", "--jump", "3"],
    ["train", "--resume", "c.safetensors", "--steps", "100", "--time-limit", "1.5"],
    ["passkey", "--checkpoint", "c", "--lengths", "512", "1024", "--trials", "3", "--k", "4", "--chunk", "200"],
    ["eval", "--checkpoint", "c", "--data", "d", "--eval-len", "2048", "--capacity", "10"],
    ["generate", "--checkpoint", "c", "--prompt", "Hello", "--max-new", "5", "--block-dir", "/tmp"],
    ["prepare", "--train", "a.txt", "--val", "b.txt", "--out", "o", "--tokenizer", "bpe", "--vocab", "300"],
    ["passkey-data", "--out", "o", "--docs", "10", "--max-fillers", "3"],
    ["attn-map", "--checkpoint", "c", "--text-file", "t", "--layer", "0", "--head", "1"],
    ["groups", "--help"],
    # Flags that must not silently lose (fuzz_cli's oracle); /dev/null passes CLI11's ExistingFile
    # and is never opened, since the harness only parses.
    ["generate", "--checkpoint", "/dev/null", "--prompt", "Hi", "--prompt-file", "/dev/null"],
    ["generate", "--checkpoint", "/dev/null", "--prompt", "Hi", "--seed", "-1"],
    ["attn-map", "--checkpoint", "/dev/null", "--text", "t", "--text-file", "/dev/null"],
    ["groups", "--controlled", "1", "-1", "--out", "g.png"],
    ["passkey-data", "--out", "o", "--seed", " -1"],
]


def without_crc(safetensors, keys=("crc32", "header_crc32")):
    n = struct.unpack("<Q", safetensors[:8])[0]
    header = json.loads(safetensors[8:8 + n])
    for key in keys:
        del header["__metadata__"][key]
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + safetensors[8 + n:]


def token_file_v1(v2):
    fp_len = struct.unpack("<I", v2[32:36])[0]
    crc_at = 36 + fp_len
    return v2[:8] + struct.pack("<I", 1) + v2[12:crc_at] + v2[crc_at + 4:]


def main():
    corpus = Path(sys.argv[1])
    for f in sorted((corpus / "checkpoint").glob("*.safetensors")):
        (corpus / "checkpoint" / (f.stem + "_nocrc.safetensors")).write_bytes(without_crc(f.read_bytes()))
        (corpus / "checkpoint" / (f.stem + "_noheadercrc.safetensors")).write_bytes(
            without_crc(f.read_bytes(), ("header_crc32",)))
    for f in sorted((corpus / "token_file").glob("*.tokens")):
        (corpus / "token_file" / (f.stem + "_v1.tokens")).write_bytes(token_file_v1(f.read_bytes()))
    (corpus / "rdata" / "zlib_entries.bin").write_bytes(rdata(True))
    (corpus / "rdata" / "plain_entries.bin").write_bytes(rdata(False))
    for name, seed in rdata_hostile().items():
        (corpus / "rdata" / name).write_bytes(seed)
    (corpus / "gpt2_files" / "small.bin").write_bytes(gpt2_files())
    for i, args in enumerate(CLI):
        (corpus / "cli" / f"args{i}.bin").write_bytes(b"\0".join(a.encode() for a in args))


if __name__ == "__main__":
    main()
