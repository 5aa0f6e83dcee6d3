# Run: python3 bench/indexer/reg_select_model.py (no GPU). Checked before the device run of round 4: the
# selection of kernels/indexer/indexer_topk_reg.cu at algorithm level (first digit from the whole row, round 3,
# or from the k-th key side of zero, round 4), against the reference order (score, then lower position).
# Algorithm-level model of topk_reg_kernel's round-4 selection (sign split; copies do not change counts).
import random, struct
def okey(f):
    u = struct.unpack('<I', struct.pack('<f', f))[0]
    if u == 0x80000000: u = 0
    return (~u) & 0xffffffff if u & 0x80000000 else u | 0x80000000
def select(keys, k, split):
    n = len(keys); need = k
    if split:
        pos = [x for x in keys if x >= 0x80000000]; neg = [x for x in keys if x < 0x80000000]
        np_ = len(pos)
        if np_ >= need: lo, hi = min(pos), max(pos)
        else: lo, hi = min(neg), max(neg); need -= np_
    else:
        lo, hi = min(keys), max(keys)
    diff = lo ^ hi
    if diff == 0: prefix, mask = hi, 0xffffffff
    else:
        hb = diff.bit_length() - 1
        mask = (~((2 << hb) - 1)) & 0xffffffff
        prefix = hi & mask; top = hb
        for p in range(3):
            if top < 0: break
            width = min(top + 1, 11); shift = top + 1 - width; dmask = (1 << width) - 1
            hist = [0] * 2048
            for x in keys:
                if (x & mask) == prefix: hist[(x >> shift) & dmask] += 1
            # scan from the top bin
            acc = 0; digit = None
            for b in range(2047, -1, -1):
                if acc + hist[b] >= need: digit = b; break
                acc += hist[b]
            assert digit is not None, "bin not found"
            count = hist[digit]; need -= acc
            prefix |= digit << shift; mask |= dmask << shift; top = shift - 1
            if count == need: break
    above_total = k - need
    out = []; eq = 0
    g = sum(1 for x in keys if (x & mask) > prefix)
    assert g == above_total, (g, above_total)
    for i, x in enumerate(keys):
        mk = x & mask
        if mk > prefix: out.append(i)
        elif mk == prefix:
            if eq < need: out.append(i)
            eq += 1
    return sorted(out)
def ref(keys, k):
    order = sorted(range(len(keys)), key=lambda i: (-keys[i], i))
    return sorted(order[:k])
random.seed(1)
def rows():
    for n in [2049, 3000, 8192]:
        for k in [1, 100, 2048]:
            if n <= k: continue
            yield [random.gauss(0, 1) for _ in range(n)], k
            yield [abs(random.gauss(0, 1)) for _ in range(n)], k
            yield [-abs(random.gauss(0, 1)) for _ in range(n)], k
            yield [random.choice([-1.0, 0.0, -0.0, 2.0, 1e-30, -1e-30]) for _ in range(n)], k
            yield [0.0] * n, k
            yield [random.choice([0.0, -0.0]) for _ in range(n)], k
            yield [-5.0] * n, k
            # exactly k non-negative, k-1, k+1
            for m in [k - 1, k, k + 1]:
                r = [abs(random.gauss(0, 1)) for _ in range(m)] + [-abs(random.gauss(0, 1)) - 1e-3 for _ in range(n - m)]
                random.shuffle(r); yield r, k
                r = [1.0] * m + [-1.0] * (n - m); random.shuffle(r); yield r, k
            yield [random.choice([3e38, -3e38, 1e-45, -1e-45]) for _ in range(n)], k
            yield [1.0 + i * 1e-7 * random.choice([-1, 1]) for i in range(n)], k
cnt = 0
for r, k in rows():
    keys = [okey(struct.unpack('<f', struct.pack('<f', x))[0]) for x in r]
    want = ref(keys, k)
    for split in (False, True):
        got = select(keys, k, split)
        assert got == want, ("mismatch", split, k, len(r))
    cnt += 1
print("ok", cnt, "rows")
