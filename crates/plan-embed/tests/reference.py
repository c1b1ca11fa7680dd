"""What the tiny model of `src/testing.rs` must give, by BERT's definition written out
plainly (Python's standard library only): `python3 reference.py` prints the embedding
of the ids below, which `tests/model.rs` compares with the crate's."""
import math

VOCAB = 23
HIDDEN, INTERMEDIATE, LAYERS, POSITIONS, HEADS = 8, 16, 2, 16, 2


def weight(k, j):
    return ((j * 7 + k * 13) % 17) / 20.0 - 0.4


def shapes():
    h, i = HIDDEN, INTERMEDIATE
    t = [("words", [VOCAB, h]), ("positions", [POSITIONS, h]), ("types", [2, h]),
         ("norm.w", [h]), ("norm.b", [h])]
    for l in range(LAYERS):
        for name, shape in [("q", [h, h]), ("k", [h, h]), ("v", [h, h]), ("o", [h, h]),
                            ("i", [i, h]), ("out", [h, i])]:
            t.append((f"{l}.{name}.w", shape))
            t.append((f"{l}.{name}.b", [shape[0]]))
        for name in ["attn_norm", "out_norm"]:
            t.append((f"{l}.{name}.w", [h]))
            t.append((f"{l}.{name}.b", [h]))
    return t


def tensors():
    out = {}
    for k, (name, shape) in enumerate(shapes()):
        flat = [weight(k, j) for j in range(math.prod(shape))]
        if len(shape) == 2:
            out[name] = [flat[r * shape[1]:(r + 1) * shape[1]] for r in range(shape[0])]
        else:
            out[name] = flat
    return out


def linear(x, w, b):
    return [[sum(xi * wi for xi, wi in zip(row, wr)) + bo for wr, bo in zip(w, b)] for row in x]


def norm(x, w, b):
    out = []
    for row in x:
        mean = sum(row) / len(row)
        var = sum((v - mean) ** 2 for v in row) / len(row)
        out.append([(v - mean) / math.sqrt(var + 1e-12) * wi + bi for v, wi, bi in zip(row, w, b)])
    return out


def embed(ids):
    t = tensors()
    x = [[t["words"][i][j] + t["positions"][p][j] + t["types"][0][j] for j in range(HIDDEN)]
         for p, i in enumerate(ids)]
    x = norm(x, t["norm.w"], t["norm.b"])
    d = HIDDEN // HEADS
    for l in range(LAYERS):
        g = lambda n: (t[f"{l}.{n}.w"], t[f"{l}.{n}.b"])
        q, k, v = linear(x, *g("q")), linear(x, *g("k")), linear(x, *g("v"))
        att = [[0.0] * HIDDEN for _ in x]
        for h in range(HEADS):
            cols = range(h * d, (h + 1) * d)
            for a in range(len(x)):
                s = [sum(q[a][c] * k[b][c] for c in cols) / math.sqrt(d) for b in range(len(x))]
                top = max(s)
                e = [math.exp(z - top) for z in s]
                total = sum(e)
                for c in cols:
                    att[a][c] = sum(e[b] / total * v[b][c] for b in range(len(x)))
        y = linear(att, *g("o"))
        y = norm([[a + b for a, b in zip(r1, r2)] for r1, r2 in zip(y, x)], *g("attn_norm"))
        inner = [[0.5 * z * (1 + math.erf(z / math.sqrt(2))) for z in row] for row in linear(y, *g("i"))]
        out = linear(inner, *g("out"))
        x = norm([[a + b for a, b in zip(r1, r2)] for r1, r2 in zip(out, y)], *g("out_norm"))
    pooled = [sum(row[j] for row in x) / len(x) for j in range(HIDDEN)]
    n = math.sqrt(sum(p * p for p in pooled))
    return [p / n for p in pooled]


# [CLS] which customers bought the most products [UNK] [SEP]
print([round(v, 6) for v in embed([2, 9, 4, 10, 12, 11, 6, 1, 3])])
