#!/usr/bin/env python3
"""Reference forward pass of an f32 qwen3moe GGUF (mf-genmodel --arch qwen3moe --type f32), plain Python.

Dev-only (docs/GENMODEL.md, "Qwen3-MoE"): it measures how decisive a synthetic model's routing is, and checks
that llama.cpp reads the file the way the generator means it.  It follows llama.cpp's qwen3moe graph (RMS norms,
q/k norms, NEOX RoPE, GQA attention; router softmax over all experts, the top K renormalised, SiLU experts) and
teacher-forces the tokens of a llama_oracle greedy run:

    tools/oracle/bin/llama_oracle greedy --model M.gguf --text "The capital of France is" -n 16 --top 5 \\
        --threads 2 --kv f32 --fa off --no-repack > g.json
    python3 tools/genmodel/moe_ref.py M.gguf g.json

It prints, per position and layer, the experts chosen, the router's selection gap (the K-th largest logit minus
the (K+1)-th: how far routing is from choosing another expert), its top-1/top-2 gap and the chosen weights;
then a summary and the largest difference between its logits and llama.cpp's for the ids llama.cpp listed.
Slow (pure Python) but fine for the tiny preset: about a second for 20 tokens.
"""
import json
import math
import mmap
import operator
import struct
import sys


def read_gguf(path):
    f = open(path, 'rb')
    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    off = 4
    if mm[0:4] != b'GGUF':
        sys.exit('%s: not a GGUF file' % path)

    def rd(fmt):
        nonlocal off
        v = struct.unpack_from('<' + fmt, mm, off)
        off += struct.calcsize('<' + fmt)
        return v[0]

    def rstr():
        nonlocal off
        n = rd('Q')
        s = mm[off:off + n].decode('utf-8', 'replace')
        off += n
        return s

    scalar = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}

    def rval(t):
        if t == 8:
            return rstr()
        if t == 9:
            et, n = rd('I'), rd('Q')
            return [rval(et) for _ in range(n)]
        return rd(scalar[t])

    rd('I')
    n_tensors, n_kv = rd('Q'), rd('Q')
    kv = {}
    for _ in range(n_kv):
        k = rstr()
        kv[k] = rval(rd('I'))
    infos = []
    for _ in range(n_tensors):
        name = rstr()
        ne = [rd('Q') for _ in range(rd('I'))]
        infos.append((name, ne, rd('I'), rd('Q')))
    al = kv.get('general.alignment', 32)
    base = (off + al - 1) // al * al
    mv = memoryview(mm)
    tensors = {}
    for name, ne, ty, o in infos:
        if ty != 0:
            sys.exit('%s: tensor %s is not f32 (write the model with --type f32)' % (path, name))
        n = math.prod(ne)
        tensors[name] = mv[base + o:base + o + 4 * n].cast('f')
    return kv, tensors


def matvec(w, ncol, nrow, x, row0=0):
    mul = operator.mul
    return [sum(map(mul, w[(row0 + j) * ncol:(row0 + j + 1) * ncol], x)) for j in range(nrow)]


def rms_norm(x, g, eps):
    r = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * r * w for v, w in zip(x, g)]


def forward(kv, T, ids):
    a = kv['general.architecture']
    if a != 'qwen3moe':
        sys.exit('not a qwen3moe model: %s' % a)
    d, L = kv[a + '.embedding_length'], kv[a + '.block_count']
    nh, nkv, hd = kv[a + '.attention.head_count'], kv[a + '.attention.head_count_kv'], kv[a + '.attention.key_length']
    base, eps = kv[a + '.rope.freq_base'], kv[a + '.attention.layer_norm_rms_epsilon']
    NE, K, FF = kv[a + '.expert_count'], kv[a + '.expert_used_count'], kv[a + '.expert_feed_forward_length']
    emb = T['token_embd.weight']
    kc, vc = [[] for _ in range(L)], [[] for _ in range(L)]
    stats, states = [], []
    for pos, tok in enumerate(ids):
        x = list(emb[tok * d:(tok + 1) * d])
        for il in range(L):
            def t(s):
                return T['blk.%d.%s' % (il, s)]
            h = rms_norm(x, t('attn_norm.weight'), eps)
            q, k, v = (matvec(t('attn_%s.weight' % s), d, n * hd, h) for s, n in (('q', nh), ('k', nkv), ('v', nkv)))

            def norm_rope(vec, g):
                out = []
                for hh in range(len(vec) // hd):
                    seg = rms_norm(vec[hh * hd:(hh + 1) * hd], g, eps)
                    r = seg[:]
                    for i in range(hd // 2):
                        th = pos * base ** (-2.0 * i / hd)
                        c, s = math.cos(th), math.sin(th)
                        r[i] = seg[i] * c - seg[i + hd // 2] * s
                        r[i + hd // 2] = seg[i] * s + seg[i + hd // 2] * c
                    out += r
                return out
            q, k = norm_rope(q, t('attn_q_norm.weight')), norm_rope(k, t('attn_k_norm.weight'))
            kc[il].append(k)
            vc[il].append(v)
            att = []
            for hh in range(nh):
                g = hh // (nh // nkv)
                qh = q[hh * hd:(hh + 1) * hd]
                sc = [sum(map(operator.mul, qh, kk[g * hd:(g + 1) * hd])) / math.sqrt(hd) for kk in kc[il]]
                m = max(sc)
                e = [math.exp(s - m) for s in sc]
                z = sum(e)
                acc = [0.0] * hd
                for w, vv in zip(e, vc[il]):
                    for i in range(hd):
                        acc[i] += w / z * vv[g * hd + i]
                att += acc
            x = [p + r for p, r in zip(x, matvec(t('attn_output.weight'), nh * hd, d, att))]
            h = rms_norm(x, t('ffn_norm.weight'), eps)
            lg = matvec(t('ffn_gate_inp.weight'), d, NE, h)
            order = sorted(range(NE), key=lambda i: -lg[i])
            m = max(lg)
            pr = [math.exp(v - m) for v in lg]
            chosen = order[:K]
            wsum = sum(pr[i] for i in chosen)
            out = [0.0] * d
            for e in chosen:
                gt = matvec(t('ffn_gate_exps.weight'), d, FF, h, e * FF)
                up = matvec(t('ffn_up_exps.weight'), d, FF, h, e * FF)
                act = [gg / (1.0 + math.exp(-gg)) * u for gg, u in zip(gt, up)]
                dn = matvec(t('ffn_down_exps.weight'), FF, d, act, e * d)
                for i in range(d):
                    out[i] += pr[e] / wsum * dn[i]
            x = [p + r for p, r in zip(x, out)]
            stats.append({'pos': pos, 'layer': il, 'experts': chosen,
                          'sel_gap': lg[order[K - 1]] - lg[order[K]] if K < NE else None,
                          'top_gap': lg[order[0]] - lg[order[1]] if NE > 1 else None,
                          'weights': [round(pr[i] / wsum, 4) for i in chosen],
                          'logit_rms': math.sqrt(sum(v * v for v in lg) / NE)})
        states.append(rms_norm(x, T['output_norm.weight'], eps))
    return stats, states, d


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: moe_ref.py MODEL_F32.gguf (GREEDY.json | \'[token ids]\')')
    kv, T = read_gguf(sys.argv[1])
    arg = sys.argv[2]
    greedy = json.load(open(arg)) if not arg.lstrip().startswith('[') else None
    ids = greedy['prompt'] + greedy['generated'][:-1] if greedy else json.loads(arg)
    stats, states, d = forward(kv, T, ids)
    for s in stats:
        print(json.dumps(s))

    def summary(vals):
        v = sorted(x for x in vals if x is not None)
        return 'min %.4f p10 %.4f median %.4f' % (v[0], v[len(v) // 10], v[len(v) // 2]) if v else 'n/a'
    K = len(stats[0]['weights'])
    print('router over %d position x layer: selection gap %s; top1-top2 gap %s; logit rms %.2f; mean chosen weights %s' % (
        len(stats), summary(s['sel_gap'] for s in stats), summary(s['top_gap'] for s in stats),
        sum(s['logit_rms'] for s in stats) / len(stats),
        [round(sum(s['weights'][i] for s in stats) / len(stats), 3) for i in range(K)]))
    if greedy:
        head = T.get('output.weight', T['token_embd.weight'])
        worst = 0.0
        for i, step in enumerate(greedy['steps']):
            st = states[len(greedy['prompt']) - 1 + i]
            for tid, logit in step['top']:
                worst = max(worst, abs(sum(map(operator.mul, head[tid * d:(tid + 1) * d], st)) - logit))
        print('largest |logit - llama.cpp| over the ids llama.cpp listed: %.6f' % worst)


if __name__ == '__main__':
    main()
