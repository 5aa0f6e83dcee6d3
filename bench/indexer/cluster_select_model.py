# Run: python3 bench/indexer/cluster_select_model.py (no GPU). Checked before the device run of round 5: the
# selection of kernels/indexer/indexer_topk_cluster.cu at algorithm level (8 blocks of T threads x 4 keys,
# per-block histograms, the super-bin then bin search over the summed histograms, packed emission counts
# with the block-rank prefix), against the reference order (score, then lower position).
import random, struct, sys
sys.path.insert(0, __file__.rsplit('/', 1)[0])
CTAS, SW, SUPERS = 8, 32, 64
def okey(f):
    u = struct.unpack('<I', struct.pack('<f', f))[0]
    if u == 0x80000000: u = 0
    return (~u) & 0xffffffff if u & 0x80000000 else u | 0x80000000
def select(keys, k, T):
    n = len(keys); span = 4 * T
    assert n <= CTAS * span
    if n <= k: return list(range(n))
    need = k
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
            hist = [[0] * 2048 for _ in range(CTAS)]
            for i, x in enumerate(keys):
                if (x & mask) == prefix: hist[i // span][(x >> shift) & dmask] += 1
            sup_local = [[sum(hist[r][s * SW:(s + 1) * SW]) for s in range(SUPERS)] for r in range(CTAS)]
            sup = [sum(sup_local[r][s] for r in range(CTAS)) for s in range(SUPERS)]
            # lane l: supers 63-2l, 62-2l; inclusive scan over lanes; first lane reaching need
            pairs = [(sup[SUPERS - 1 - 2 * l], sup[SUPERS - 2 - 2 * l]) for l in range(32)]
            acc = 0; L = None
            for l, (a, b) in enumerate(pairs):
                if acc + a + b >= need: L = l; break
                acc += a + b
            assert L is not None
            a, b = pairs[L]
            if acc + a >= need: S, before = SUPERS - 1 - 2 * L, acc
            else: S, before = SUPERS - 2 - 2 * L, acc + a
            cs = [sum(hist[r][S * SW + SW - 1 - l] for r in range(CTAS)) for l in range(32)]
            yi = 0; l2 = None
            for l in range(32):
                yi += cs[l]
                if before + yi >= need: l2 = l; break
            assert l2 is not None
            count = cs[l2]
            need -= before + yi - count
            prefix |= (S * SW + SW - 1 - l2) << shift; mask |= dmask << shift; top = shift - 1
            if count == need: break
    above_total = k - need
    # packed per-thread counts; exclusive prefix in (block, thread) order; each field < 65536
    out = [None] * k
    packed = []
    for r in range(CTAS):
        for t in range(T):
            g = e = 0
            for q in range(4):
                pos = r * span + 4 * t + q
                if pos < n:
                    mk = keys[pos] & mask
                    if mk > prefix: g += 1
                    elif mk == prefix: e += 1
            packed.append(g | (e << 16))
    excl = 0
    for idx_t, pk in enumerate(packed):
        r, t = divmod(idx_t, T)
        gn, en = excl & 0xffff, excl >> 16
        for q in range(4):
            pos = r * span + 4 * t + q
            if pos >= n: continue
            mk = keys[pos] & mask; idx = -1
            if mk > prefix: idx = gn; gn += 1
            elif mk == prefix:
                if en < need: idx = above_total + en
                en += 1
            if 0 <= idx < k:
                assert out[idx] is None, "two keys written to one output entry"
                out[idx] = pos
        excl += pk
        assert (excl & 0xffff) < 65536 and (excl >> 16) < 65536
    assert all(o is not None for o in out), "output entries left unwritten"
    return sorted(out)
def ref(keys, k):
    order = sorted(range(len(keys)), key=lambda i: (-keys[i], i))
    return sorted(order[:k])
random.seed(5)
def rows():
    for n in [700, 2049, 3000, 8192, 12345, 16384]:
        for k in [1, 100, 2048, 4096]:
            yield [random.gauss(0, 1) for _ in range(n)], k
            yield [abs(random.gauss(0, 1)) for _ in range(n)], k
            yield [-abs(random.gauss(0, 1)) * 1e-20 for _ in range(n)], k
            yield [10 + 1e-3 * random.gauss(0, 1) for _ in range(n)], k
            yield [1.0 + 1e-7 * random.randint(0, 15) for _ in range(n)], k
            yield [random.randint(0, 15) * 0.25 for _ in range(n)], k
            yield [random.choice([-1.0, 0.0, -0.0, 2.0, 1e-30, -1e-30]) for _ in range(n)], k
            yield [0.0] * n, k
            yield [random.choice([0.0, -0.0]) for _ in range(n)], k
            yield [-3.0] * n, k
            r = [0.5] * n; r[n // 2] = 2.0; yield r, k
            r = [random.gauss(0, 1) for _ in range(n)]; r[1:5] = [3e38, -3e38, 1e-40, -1e-40][:len(r[1:5])]; yield r, k
cnt = 0
for r, k in rows():
    keys = [okey(struct.unpack('<f', struct.pack('<f', x))[0]) for x in r]
    want = ref(keys, k)
    T = 256 if len(r) <= 8192 else 512
    got = select(keys, k, T)
    assert got == want, ("mismatch", k, len(r))
    cnt += 1
print("ok", cnt, "rows")
