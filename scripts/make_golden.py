#!/usr/bin/env python3
"""terngrad-bench: writes codec/tests/data/golden_payloads.txt from an independent pure-Python
implementation of the codec as codec/include/tg/*.hpp specify it
(Philox4x32-10, keying, keep rule, clipping statistics in the canonical order, packings, header, CRC32C).

Run: python3 scripts/make_golden.py > codec/tests/data/golden_payloads.txt
The C++ tests check the C++ codecs against this file; this script checks itself against the
published Philox known answers and the CRC32C check value before it writes anything.
"""
import math
import struct
import sys

M32 = 0xFFFFFFFF


def philox4x32_10(ctr, key):
    c = list(ctr)
    k0, k1 = key
    for _ in range(10):
        p0 = 0xD2511F53 * c[0]
        p1 = 0xCD9E8D57 * c[2]
        hi0, lo0 = p0 >> 32, p0 & M32
        hi1, lo1 = p1 >> 32, p1 & M32
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
        k0 = (k0 + 0x9E3779B9) & M32
        k1 = (k1 + 0xBB67AE85) & M32
    return c


def uniform(seed, worker, tensor, step, i):
    block = philox4x32_10([i // 4, step, tensor, worker], [seed & M32, seed >> 32])
    return block[i % 4]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def canonical_sum(terms):
    total = 0.0
    for start in range(0, len(terms), 2048):
        lane = [0.0] * 8
        for k in range(start, min(len(terms), start + 2048)):
            lane[(k - start) % 8] += terms[k]
        total = total + (((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7])))
    return total


def scalar_and_cap(g, clip, c):
    m = max((abs(x) for x in g), default=0.0)
    if clip == "none" or not g:
        return m, m
    n = float(len(g))
    mean = canonical_sum(g) / n
    var = canonical_sum([(x - mean) * (x - mean) for x in g]) / n
    bound = f32(c * math.sqrt(var)) if c * math.sqrt(var) < 3.5e38 else math.inf
    s = min(m, bound)
    return s, s


def trits_of(g, seed, worker, tensor, step, clip, c):
    s, cap = scalar_and_cap(g, clip, c)
    scale = 4294967296.0 / s if s > 0 else 0.0
    out = []
    for i, x in enumerate(g):
        a = min(abs(x), cap)
        keep = float(uniform(seed, worker, tensor, step, i)) < a * scale
        out.append(0 if not keep else (-1 if x < 0 else 1))
    return s, out


def code(t):
    return 0 if t == 0 else (1 if t > 0 else 2)


def pack(trits, packing):
    if packing == "2bit":
        body = bytearray((len(trits) + 3) // 4)
        for i, t in enumerate(trits):
            body[i // 4] |= code(t) << (2 * (i % 4))
        return bytes(body)
    body = bytearray((len(trits) + 4) // 5)
    for i, t in enumerate(trits):
        body[i // 5] += code(t) * 3 ** (i % 5)
    return bytes(body)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def payload(g, seed, worker, tensor, step, clip, c, packing):
    s, trits = trits_of(g, seed, worker, tensor, step, clip, c)
    body = pack(trits, packing)
    pid = {"2bit": 1, "base3": 2}[packing]
    head = b"TGRD" + struct.pack("<HBBQfII", 1, pid, 0, len(g), s, tensor, crc32c(body))
    return head + struct.pack("<I", crc32c(head)) + body


def self_check():
    kats = [
        ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
        ([M32] * 4, [M32, M32], [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
        ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
         [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
    ]
    for ctr, key, want in kats:
        assert philox4x32_10(ctr, key) == want, "Philox known answer failed"
    assert crc32c(b"123456789") == 0xE3069283, "CRC32C check value failed"


def lcg_floats(n, seed, scale):
    """Deterministic float32 test gradients (a 64-bit LCG, so no library's RNG is involved)."""
    x = seed
    out = []
    for _ in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        u = ((x >> 11) / float(1 << 53)) * 2.0 - 1.0
        out.append(f32(u * scale))
    return out


def main():
    self_check()
    cases = [
        ("tiny-2bit", [0.5, -0.25, 0.0, 1.0, -1.0], 42, 0, 0, 0, "none", 2.5, "2bit"),
        ("tiny-base3", [0.5, -0.25, 0.0, 1.0, -1.0, 0.125, -0.75], 42, 1, 2, 3, "none", 2.5, "base3"),
        ("lcg33-2bit", lcg_floats(33, 7, 0.01), 0x0123456789ABCDEF, 3, 5, 1000, "none", 2.5, "2bit"),
        ("lcg33-base3", lcg_floats(33, 7, 0.01), 0x0123456789ABCDEF, 3, 5, 1000, "none", 2.5, "base3"),
        ("lcg100-clip", lcg_floats(100, 9, 1.0) + [40.0], 99, 0, 1, 2, "clip", 2.5, "2bit"),
        ("lcg100-saturate", lcg_floats(100, 9, 1.0) + [-40.0], 99, 0, 1, 2, "saturate", 1.5, "base3"),
        ("lcg4100-clip", lcg_floats(4100, 11, 3.0), 2**63 + 5, 7, 9, 11, "clip", 2.5, "2bit"),
        ("zeros-2bit", [0.0] * 9, 1, 0, 0, 0, "none", 2.5, "2bit"),
    ]
    print("# Golden payloads for terngrad-bench, payload format version 1, stream version 1.")
    print("# Produced by scripts/make_golden.py, an independent pure-Python implementation of")
    print("# the spec (checked against the published Philox4x32-10 answers and CRC32C('123456789')).")
    print("# case NAME SEED WORKER TENSOR STEP CLIP C PACKING N / input <float32 bits> / payload <hex>")
    for name, g, seed, worker, tensor, step, clip, c, packing in cases:
        g = [f32(x) for x in g]
        print(f"case {name} {seed} {worker} {tensor} {step} {clip} {c!r} {packing} {len(g)}")
        print("input " + " ".join(struct.pack("<f", x)[::-1].hex() for x in g))
        print("payload " + payload(g, seed, worker, tensor, step, clip, c, packing).hex())


if __name__ == "__main__":
    sys.exit(main())
