"""The numba kernels of :mod:`cqa_search.compiled` (importing this module imports numba;
numba caches the compiled code on disk)."""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["top_k", "sum_dp", "viterbi", "locate", "align", "number_tokens", "token_slots",
           "quadratic_forms", "bucket_starts", "search_directed", "hull_spans",
           "distortion", "forward_table", "scatter_max"]


@njit(cache=True, nogil=True, inline="always")
def worse(s1, t1, r1, s2, t2, r2):
    """Hit 1 ranks below hit 2: lower score, or equal and a larger (tie rank, row)."""
    if s1 != s2:
        return s1 < s2
    if t1 != t2:
        return t1 > t2
    return r1 > r2

@njit(cache=True, nogil=True)
def sift_down(hs, ht, hr, i, n):
    """Restore the heap (root: the worst hit kept) below position ``i`` of ``n``."""
    while True:
        left = 2 * i + 1
        if left >= n:
            return
        w = left
        right = left + 1
        if right < n and worse(hs[right], ht[right], hr[right], hs[left], ht[left],
                               hr[left]):
            w = right
        if worse(hs[w], ht[w], hr[w], hs[i], ht[i], hr[i]):
            hs[i], hs[w] = hs[w], hs[i]
            ht[i], ht[w] = ht[w], ht[i]
            hr[i], hr[w] = hr[w], hr[i]
            i = w
        else:
            return


@njit(cache=True, nogil=True)
def _lower_bound(indices, lo, hi, d):
    """The first position in ``indices[lo:hi]`` (sorted) holding a row >= ``d`` (``hi``
    if none), by binary search."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if indices[mid] < d:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _gallop(indices, lo, hi, d):
    """:func:`_lower_bound`, searching from ``lo`` outwards (the rows sought are near)."""
    step = 1
    while lo + step < hi and indices[lo + step] < d:
        step <<= 1
    return _lower_bound(indices, lo, min(lo + step + 1, hi), d)


@njit(cache=True, nogil=True, inline="always")
def _offer(s, d, hs, ht, hr, n, k, doc_category, category, by_category, allowed, by_allowed,
           tie_rank, by_tie):
    """Offer document ``d`` of score ``s`` to the heap of the ``n`` best kept (of ``k``);
    the new ``(n, theta)`` (``theta``: the k-th best score once k are kept, else 0)."""
    if by_category and doc_category[d] != category:
        return n, hs[0] if n == k else 0.0
    if by_allowed and not allowed[d]:
        return n, hs[0] if n == k else 0.0
    tr = np.int64(tie_rank[d]) if by_tie else d
    if n < k:
        hs[n], ht[n], hr[n] = s, tr, d
        n += 1
        if n == k:
            for h in range(k // 2 - 1, -1, -1):
                sift_down(hs, ht, hr, h, k)
    elif worse(hs[0], ht[0], hr[0], s, tr, d):
        hs[0], ht[0], hr[0] = s, tr, d
        sift_down(hs, ht, hr, 0, k)
    return n, hs[0] if n == k else 0.0


#: A window whose postings are fewer than its rows over this is read by its postings
#: (each row visited once, from a posting) rather than row by row. 4 rather than 8: short
#: queries on 200,000 questions 9 % faster, whole questions the same (issue 42).
SPARSE = 4
#: The first window is the workspace's length over this (then each window twice the last,
#: up to the workspace): the k-th best score, which lets the pruning skip postings, is
#: known after a few thousand rows rather than after the first 65,536.
FIRST_WINDOW = 16
#: Slack on the bounds of the pruning (float64 sums of a few hundred terms are exact to
#: about 1e-14 of their value): a document is skipped only when its bound, enlarged by
#: this share, stays below the k-th best score.
SLACK = 1e-9
#: Terms go out of the sums only when they have this many times the postings left of the
#: essential terms: completing a document searches the postings of every term out (a few
#: probes each), which costs more than adding them when they are not many more (the
#: kernel alone on 500 short queries, 200,000 questions: 1.45x, 1.34x, 1.29x the speed
#: without pruning for 1, 2, 3, one run each at load average 7-10; 1.16x for 4 before the
#: windows' offers had functions of their own; without this rule, slower than no pruning).
OUT_POSTINGS = 2


@njit(cache=True, nogil=True)
def _add(acc, indices, weights, p, q, lo, c):
    """Add the products of postings ``p`` to ``q`` (rows from ``lo`` on) into ``acc``.
    (A function of its own: in :func:`top_k`'s body, which passes ``acc`` to other
    functions, every addition read ``acc``'s address again: a third slower.)"""
    for r in range(p, q):
        # (an unsigned index: numba then skips the check for negative indices)
        acc[np.uint64(indices[r] - lo)] += np.float64(weights[r] * c)


@njit(cache=True, nogil=True)
def _completed(s, d, indices, weights, coef, first, pos, cur, tail, essential_end, theta):
    """The score of row ``d`` whose sum over the essential terms (the first
    ``essential_end`` in query order) is ``s``: the products of the other terms'
    postings added in query order (so the sum is the one numpy makes); -1.0 as soon as
    the bounds of the terms left (``tail[j]``: the sum of the bounds of the terms from
    ``j`` on) show it cannot reach ``theta``. ``cur[j]``: where the last search in term ``j``'s window
    postings (``first[j]`` to ``pos[j]``) ended, searched on from there when ``d`` is
    past it."""
    for j in range(essential_end, first.shape[0]):
        if (s + tail[j]) * (1.0 + SLACK) < theta:
            return -1.0
        c = cur[j]
        if c > first[j] and indices[c - 1] >= d:
            c = first[j]  # (a row before the last one searched: from the window's start)
        c = _gallop(indices, c, pos[j], d)
        cur[j] = c
        if c < pos[j] and indices[c] == d:
            s += np.float64(weights[c] * coef[j])
    return s


@njit(cache=True, nogil=True)
def _window(acc, lo, top, sparse, indices, first, pos, theta, hs, ht, hr, n, k,
            doc_category, category, by_category, allowed, by_allowed, tie_rank, by_tie):
    """The offers of a window of :func:`top_k` whose sums (``acc[:top]``) are of every
    term: read by rows or, ``sparse``, by the postings (see :func:`top_k`); ``acc`` left
    zeroed. The new ``(n, theta)``."""
    if sparse:
        for j in range(first.shape[0]):
            for r in range(first[j], pos[j]):
                x = np.uint64(indices[r] - lo)
                s = acc[x]
                if s == 0.0:  # taken already
                    continue
                acc[x] = 0.0
                if s >= theta and s > 0.0:
                    n, theta = _offer(s, lo + np.int64(x), hs, ht, hr, n, k, doc_category,
                                      category, by_category, allowed, by_allowed, tie_rank,
                                      by_tie)
    else:
        for x in range(top):
            s = acc[x]
            if s >= theta and s > 0.0:  # rare once the heap is full: a predictable branch
                n, theta = _offer(s, lo + x, hs, ht, hr, n, k, doc_category, category,
                                  by_category, allowed, by_allowed, tie_rank, by_tie)
        acc[:top] = 0.0
    return n, theta


@njit(cache=True, nogil=True)
def _pruned_window(acc, lo, top, sparse, indices, weights, coef, first, pos, cur, tail,
                   n_in, theta, hs, ht, hr, n, k, doc_category, category, by_category,
                   allowed, by_allowed, tie_rank, by_tie):
    """The offers of a window of :func:`top_k` whose sums (``acc[:top]``) are of its
    first ``n_in`` terms only: each sum that may reach the k-th best is completed
    (:func:`_completed`); read by rows or, ``sparse``, by the postings of those terms
    (see :func:`top_k`); ``acc`` left zeroed. The new ``(n, theta)``. (A function of its
    own: in :func:`top_k`'s body it slowed the windows of every term by a third.)"""
    # a sum over the essential terms below this cannot reach the k-th best
    least = theta / (1.0 + SLACK) - tail[n_in]
    if sparse:
        for j in range(n_in):
            for r in range(first[j], pos[j]):
                x = np.uint64(indices[r] - lo)
                s = acc[x]
                if s == 0.0:  # taken already
                    continue
                acc[x] = 0.0
                if s >= least:
                    d = lo + np.int64(x)
                    s = _completed(s, d, indices, weights, coef, first, pos, cur, tail, n_in,
                                   theta)
                    if s >= theta and s > 0.0:
                        n, theta = _offer(s, d, hs, ht, hr, n, k, doc_category, category,
                                          by_category, allowed, by_allowed, tie_rank, by_tie)
    else:
        for x in range(top):
            s = acc[x]
            if s >= least and s > 0.0:
                s = _completed(s, lo + x, indices, weights, coef, first, pos, cur, tail, n_in,
                               theta)
                if s >= theta and s > 0.0:
                    n, theta = _offer(s, lo + x, hs, ht, hr, n, k, doc_category, category,
                                      by_category, allowed, by_allowed, tie_rank, by_tie)
        acc[:top] = 0.0
    return n, theta


@njit(cache=True, nogil=True)
def top_k(indptr, indices, weights, term_ids, coef, k, acc, most, doc_category, category,
          by_category, allowed, by_allowed, tie_rank, by_tie):
    """``(rows, scores)`` of the ``k`` best documents holding a term of the query (score >
    0, passing the filters), best first, ties broken by ``(tie rank, row)``: the numpy
    path's result, bit for bit.

    The rows are cut into windows of at most ``len(acc)`` documents (``acc``: a zeroed
    float64 workspace small enough to stay in the CPU cache, left zeroed). In each window,
    every query term in query order adds its postings' products (``float32(weight) *
    float32(query weight)``, numpy's arithmetic for a float32 array times a Python float)
    into ``acc`` in float64: each document's score is summed in the order numpy's
    ``bincount`` sums it, so it is the same number. Then the scores reaching the k-th best
    kept so far go to a heap of the k best: read from one pass over the window's rows, or,
    when the window has few postings for its rows (rare terms: :data:`SPARSE`), from the
    rows of its postings, each taken once (its sum read, then zeroed), so that a query
    costs its postings, not the archive's rows. Every posting is read once or twice, in
    order; the only random accesses are to ``acc``, in the cache.

    MaxScore (Turtle and Flood, 1995) skips most postings of the last terms once k hits
    are kept (the callers order the terms rarest first: the last are the common ones,
    with the most postings and the smallest weights). ``most[t]`` is the largest posting
    weight of term ``t`` (negative: not known yet, found here from its postings and
    written back), so each term's product is at most ``bound[j]``. The last terms whose
    bounds sum below the k-th best score are *non-essential*: a document holding only
    those cannot reach the top k. After each window they are left out of the next
    windows' sums; a document of the other terms whose sum plus their bounds reaches the
    k-th best is completed by searching their postings (:func:`_completed`), its sum
    continued in query order, hence the same number. The first window is short
    (:data:`FIRST_WINDOW`) so that the k-th best is known early; the search ends when no
    essential term has postings left.
    """
    n_t = term_ids.shape[0]
    window = acc.shape[0]
    pos = np.empty(n_t, dtype=np.int64)
    end = np.empty(n_t, dtype=np.int64)
    first = np.empty(n_t, dtype=np.int64)  # the window's postings: first[j] to pos[j]
    cur = np.empty(n_t, dtype=np.int64)
    bound = np.empty(n_t, dtype=np.float64)
    done = np.int64(1) << 62  # beyond every row
    lo = done
    for j in range(n_t):
        t = term_ids[j]
        pos[j] = indptr[t]
        end[j] = indptr[t + 1]
        if most[t] < 0:
            m = np.float32(0.0)
            for r in range(pos[j], end[j]):
                if weights[r] > m:
                    m = weights[r]
            most[t] = m
        bound[j] = np.float64(most[t] * coef[j])  # float32 products round monotonically
        if pos[j] < end[j] and indices[pos[j]] < lo:
            lo = np.int64(indices[pos[j]])
    tail = np.zeros(n_t + 1, dtype=np.float64)  # the bounds of the terms from j on, summed
    for j in range(n_t - 1, -1, -1):
        tail[j] = tail[j + 1] + bound[j]
    n_in = n_t  # the essential terms: the first n_in
    hs = np.empty(k, dtype=np.float64)
    ht = np.empty(k, dtype=np.int64)
    hr = np.empty(k, dtype=np.int64)
    n = 0
    theta = 0.0  # the k-th best score once k are kept (a hit must reach it)
    width = max(window // FIRST_WINDOW, 1)
    while lo < done:
        hi = lo + width
        width = min(2 * width, window)
        top = 0  # acc[:top] holds the window's sums
        n_postings = 0
        for j in range(n_t):
            p = pos[j]
            first[j] = cur[j] = p
            if p >= end[j] or indices[p] >= hi:
                continue
            q = _gallop(indices, p, end[j], hi)
            pos[j] = q
            if j >= n_in:
                continue
            _add(acc, indices, weights, p, q, lo, coef[j])
            top = max(top, np.int64(indices[q - 1]) - lo + 1)
            n_postings += q - p
        if n_in == n_t:  # every term summed: the sums are the scores
            n, theta = _window(acc, lo, top, n_postings * SPARSE < top, indices, first, pos,
                               theta, hs, ht, hr, n, k, doc_category, category,
                               by_category, allowed, by_allowed, tie_rank, by_tie)
        else:
            n, theta = _pruned_window(acc, lo, top, n_postings * SPARSE < top, indices,
                                      weights, coef, first, pos, cur, tail, n_in, theta, hs,
                                      ht, hr, n, k, doc_category, category, by_category,
                                      allowed, by_allowed, tie_rank, by_tie)
        # the last terms whose bounds stay below the k-th best go out of the sums
        while n_in > 0 and tail[n_in - 1] * (1.0 + SLACK) < theta:
            out_left = 0  # postings left of the terms that would be out, and of the others
            for j in range(n_in - 1, n_t):
                out_left += end[j] - pos[j]
            in_left = 0
            for j in range(n_in - 1):
                in_left += end[j] - pos[j]
            if out_left < OUT_POSTINGS * in_left:
                break
            n_in -= 1
        lo = done  # the next window starts at the next row holding an essential term
        for j in range(n_in):
            if pos[j] < end[j] and indices[pos[j]] < lo:
                lo = np.int64(indices[pos[j]])
    if n < k:
        for h in range(n // 2 - 1, -1, -1):
            sift_down(hs, ht, hr, h, n)
    rows = np.empty(n, dtype=np.int64)
    out = np.empty(n, dtype=np.float64)
    for m in range(n - 1, -1, -1):
        rows[m] = hr[0]
        out[m] = hs[0]
        hs[0], ht[0], hr[0] = hs[m], ht[m], hr[m]
        sift_down(hs, ht, hr, 0, m)
    return rows, out


@njit(cache=True, nogil=True)
def sum_dp(probs, lengths, running, rescale):
    """The sum-form segmentation DP of :func:`cqa_search.translation.scoring._sum_dp`,
    the same arithmetic (products summed over lengths for each row; rows rescaled by their
    window's largest value every ``rescale`` positions): its result to rounding (numpy's
    ``einsum`` may add the products in another order). ``running[p]``: rows still running
    at ``p``."""
    P, L, R = probs.shape
    alpha = np.zeros((P + L, R))
    alpha[L - 1, :] = 1.0
    log_scale = np.zeros(R)
    for p in range(1, P + 1):
        hi = running[p]
        if hi == 0:
            break
        row = alpha[L - 1 + p]
        for length in range(L):
            a = alpha[p - 1 + length]
            w = probs[p - 1, length]
            for r in range(hi):
                row[r] += a[r] * w[r]
        if p % rescale == 0:
            for r in range(hi):
                top = 0.0
                for x in range(p, p + L):
                    if alpha[x, r] > top:
                        top = alpha[x, r]
                if top == 0.0:
                    top = 1.0
                for x in range(p, p + L):
                    alpha[x, r] /= top
                log_scale[r] += np.log(top)
    out = np.empty(R)
    for r in range(R):
        out[r] = np.log(alpha[L - 1 + lengths[r], r]) + log_scale[r]
    return out


@njit(cache=True, nogil=True)
def viterbi(probs, n_rows, floor):
    """The max-form DP of :func:`cqa_search.translation.scoring._viterbi` over the first
    ``n_rows`` rows of ``probs`` (the first best length on ties, as ``argmax``): ``pad``
    (P + L, n_rows) and ``back`` (P + 1, n_rows). The log of a span probability is taken
    here, of the non-zero ones only (most are zero: numpy's log of 0 takes a slow path),
    ``floor`` for the others (numpy's ``maximum(log(p), floor)``; libm's log may differ
    from numpy's in the last bit)."""
    P, L, _ = probs.shape
    pad = np.full((P + L, n_rows), floor)
    pad[L - 1, :] = 0.0
    back = np.zeros((P + 1, n_rows), dtype=np.int8)
    for p in range(1, P + 1):
        for r in range(n_rows):
            x = probs[p - 1, 0, r]
            best = pad[p - 1, r] + (np.log(x) if x > 0.0 else floor)
            arg = 0
            for length in range(1, L):
                x = probs[p - 1, length, r]
                v = pad[p - 1 + length, r] + (np.log(x) if x > 0.0 else floor)
                if v > best:
                    best = v
                    arg = length
            pad[L - 1 + p, r] = best
            back[p, r] = L - arg
    return pad, back


@njit(cache=True, nogil=True)
def locate(indptr, indices, term_ids, rows):
    """:func:`cqa_search.retrieval.postings.locate`'s search: the posting position of
    every (term, row) pair that occurs, term-major, rows in their order. The rows are
    visited in increasing order, each search galloping on from where the previous one
    ended (a few probes where a binary search over the whole posting list takes about
    log2 of its length), then emitted in their given order."""
    n = rows.shape[0]
    size = n * term_ids.shape[0]
    found_p = np.empty(size, dtype=np.int64)
    found_i = np.empty(size, dtype=np.int64)
    found_j = np.empty(size, dtype=np.int64)
    order = np.argsort(rows)
    slot = np.empty(n, dtype=np.int64)
    c = 0
    for j in range(term_ids.shape[0]):
        lo = indptr[term_ids[j]]
        hi = indptr[term_ids[j] + 1]
        if lo == hi:
            continue
        slot[:] = -1
        at = lo
        for m in range(n):
            i = order[m]
            r = rows[i]
            if indices[at] < r:
                at = _gallop(indices, at, hi, r)
                if at == hi:
                    break
            if indices[at] == r:
                slot[i] = at
        for i in range(n):
            if slot[i] >= 0:
                found_p[c] = slot[i]
                found_i[c] = i
                found_j[c] = j
                c += 1
    return found_p[:c].copy(), found_i[:c].copy(), found_j[:c].copy()


@njit(cache=True, nogil=True)
def bucket_starts(keys, low, shift, n_buckets):
    """The directory of :func:`search_directed`: ``out[b]`` is the first position in
    ``keys`` (sorted) holding a key ``>= low + (b << shift)``, for ``b`` in
    ``0..n_buckets`` (``len(keys)`` past the last key: the buckets must cover the keys);
    one pass over the keys."""
    n = keys.shape[0]
    out = np.empty(n_buckets + 1, dtype=np.int64)
    b = 0
    for i in range(n):
        kb = (keys[i] - low) >> shift
        while b <= kb and b <= n_buckets:
            out[b] = i
            b += 1
    while b <= n_buckets:
        out[b] = n
        b += 1
    return out


@njit(cache=True, nogil=True)
def search_directed(keys, starts, low, shift, needles):
    """``np.searchsorted(keys, needles)`` (leftmost) through the directory ``starts`` of
    :func:`bucket_starts`: a needle's high bits (above ``shift``, from ``low``) give the
    few keys that can hold its position, one binary search among them; a search in a
    table of tens of millions of keys then reads one entry of the directory and a cache
    line or two of keys instead of about 25 lines."""
    out = np.empty(needles.shape[0], dtype=np.int64)
    n = keys.shape[0]
    last = starts.shape[0] - 2  # the last bucket
    for i in range(needles.shape[0]):
        x = needles[i]
        if x <= low:  # (low is at most the first key)
            out[i] = 0
            continue
        b = (x - low) >> shift
        if b > last:
            out[i] = n
            continue
        out[i] = _lower_bound(keys, starts[b], starts[b + 1], x)
    return out


@njit(cache=True, nogil=True)
def quadratic_forms(offsets, terms, weights, s_indptr, s_indices, s_data, mark):
    """``y^T S y`` of each bag of words ``y`` (bag ``d``: ``terms[offsets[d]:offsets[d +
    1]]``, distinct ids below ``S``'s size, with ``weights``), ``S`` a CSR matrix: for each
    word of the bag, its row of ``S`` against the bag's weights laid out in ``mark`` (a
    zeroed float64 array of ``S``'s size, left zeroed). Reads only the bag's rows of
    ``S`` where a sparse product forms every word the bag's words are similar to."""
    n = offsets.shape[0] - 1
    out = np.zeros(n)
    for d in range(n):
        a, b = offsets[d], offsets[d + 1]
        for p in range(a, b):
            mark[terms[p]] = weights[p]
        total = 0.0
        for p in range(a, b):
            i = terms[p]
            row = 0.0
            for q in range(s_indptr[i], s_indptr[i + 1]):
                row += np.float64(s_data[q]) * mark[s_indices[q]]
            total += weights[p] * row
        for p in range(a, b):
            mark[terms[p]] = 0.0
        out[d] = total
    return out


@njit(cache=True, nogil=True)
def align(doc, row, last, count, f_indptr, f_term, f_prob, p_null, n, n_terms):
    """Eq. 9 of :meth:`cqa_search.translation.scoring.TranslationScorer._align` and the
    word-translation sums, one pass over the (candidate, word) pairs and the non-zero
    ``P(w | word)`` of each word's table row ``f_indptr[row]:f_indptr[row + 1]`` (query
    term, probability), in the order of the numpy path's entries: for each (candidate,
    term), the last position among the words of largest probability, when that is above 0
    and at least NULL's, else -1 (comparisons only: its result exactly); and ``sum
    P(w | word) * count`` (added in the entries' order, as ``bincount``: the same sums)."""
    size = n * n_terms
    top = np.zeros(size)
    best = np.full(size, -1, dtype=np.int64)
    sums = np.zeros(size)
    for g in range(doc.shape[0]):
        base = doc[g] * n_terms
        at = last[g]
        c = count[g]
        for e in range(f_indptr[row[g]], f_indptr[row[g] + 1]):
            k = base + f_term[e]
            p = f_prob[e]
            sums[k] += p * c
            if p > top[k]:
                top[k] = p
                best[k] = at
            elif p == top[k] and p > 0.0 and at > best[k]:
                best[k] = at
    for k in range(size):
        if best[k] >= 0 and top[k] < p_null[k % n_terms]:
            best[k] = -1
    return best, sums


_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@njit(cache=True, nogil=True)
def number_tokens(data, at, out, n_out, slots, starts, lengths, hashes, arena, n_arena,
                  n_known):
    """Number the tokens of ``data[at:]`` (runs of bytes other than spaces) into
    ``out[n_out:]``, in a table of the tokens met so far, numbered in the order they first
    occur; ``-2`` for the separator ``b"\\x01"``.

    The table is open addressing over ``slots`` (a power of two, -1 free, at most half
    full) holding token numbers; token ``t``'s bytes are ``arena[starts[t]:starts[t] +
    lengths[t]]`` and its FNV-1a hash ``hashes[t]``. Returns ``(at, n_out, n_arena,
    n_known)``: ``at < len(data)`` when a new token found the table full (the caller grows
    it and calls again from ``at``). The dictionary twin (``bytes.split`` and a ``dict``)
    numbers the same tokens the same way.
    """
    size = data.shape[0]
    mask = slots.shape[0] - 1
    capacity = min(starts.shape[0], slots.shape[0] // 2)
    i = at
    while i < size:
        if data[i] == 32:
            i += 1
            continue
        j = i
        h = _FNV_OFFSET
        while j < size and data[j] != 32:
            h = (h ^ np.uint64(data[j])) * _FNV_PRIME
            j += 1
        n = j - i
        if n == 1 and data[i] == 1:
            out[n_out] = -2
            n_out += 1
            i = j
            continue
        s = np.int64(h & np.uint64(mask))
        while True:
            t = slots[s]
            if t < 0:
                break
            if hashes[t] == h and lengths[t] == n:
                a = starts[t]
                same = True
                for x in range(n):
                    if arena[a + x] != data[i + x]:
                        same = False
                        break
                if same:
                    break
            s = (s + 1) & mask
        if t < 0:  # a new token: number n_known
            if n_known == capacity or n_arena + n > arena.shape[0]:
                return i, n_out, n_arena, n_known  # full: grown by the caller
            arena[n_arena:n_arena + n] = data[i:j]
            t = n_known
            starts[t] = n_arena
            lengths[t] = n
            hashes[t] = h
            slots[s] = t
            n_arena += n
            n_known += 1
        out[n_out] = t
        n_out += 1
        i = j
    return i, n_out, n_arena, n_known


@njit(cache=True, nogil=True)
def token_slots(hashes, n_known, size):
    """The ``slots`` of :func:`number_tokens` (``size``, a power of two) of the first
    ``n_known`` tokens."""
    slots = np.full(size, -1, dtype=np.int64)
    mask = size - 1
    for u in range(n_known):
        r = np.int64(hashes[u] & np.uint64(mask))
        while slots[r] >= 0:
            r = (r + 1) & mask
        slots[r] = u
    return slots


@njit(cache=True, nogil=True)
def hull_spans(A, max_length, tight, known, lengths):
    """The bi-phrase candidates of :func:`cqa_search.translation.scoring._hull_spans`, in
    its order (by length, then row, then start): ``known[length - 1, c or 0, x1]`` says
    whether the window of that length starting at ``x1`` can be a phrase of the table
    (one row for every ``c`` when ``known`` has one); the windows of row ``c`` lie in its
    first ``lengths[c]`` positions (at most ``P``)."""
    n, P = A.shape
    top = min(max_length, P)
    size = 0
    for c in range(n):
        size += lengths[c]
    size *= max(top, 0)
    o_len = np.empty(size, dtype=np.int64)
    o_c = np.empty(size, dtype=np.int64)
    o_x = np.empty(size, dtype=np.int64)
    o_lo = np.empty(size, dtype=np.int64)
    o_hi = np.empty(size, dtype=np.int64)
    per_row = known.shape[1] > 1
    m = 0
    for length in range(1, top + 1):
        for c in range(n):
            kc = c if per_row else 0
            for x1 in range(lengths[c] - length + 1):
                if not known[length - 1, kc, x1]:
                    continue
                if tight and (A[c, x1] < 0 or A[c, x1 + length - 1] < 0):
                    continue
                lo = 1 << 40
                hi = -(1 << 40)
                linked = False
                for x in range(x1, x1 + length):
                    a = A[c, x]
                    if a >= 0:
                        linked = True
                        if a < lo:
                            lo = a
                        if a > hi:
                            hi = a
                if linked and hi - lo < max_length:
                    o_len[m] = length
                    o_c[m] = c
                    o_x[m] = x1
                    o_lo[m] = lo
                    o_hi[m] = hi
                    m += 1
    return o_len[:m].copy(), o_c[:m].copy(), o_x[:m].copy(), o_lo[:m].copy(), o_hi[:m].copy()


@njit(cache=True, nogil=True)
def distortion(back, S1, S2, BG):
    """:meth:`cqa_search.translation.scoring.TranslationScorer._distortion`: each row's
    Viterbi segmentation walked from its end, the gaps between consecutive segments
    (background words skipped) summed in the same order."""
    n, width = back.shape
    out = np.zeros(n)
    for c in range(n):
        cur = width - 1
        seen = False
        right = 0
        steps = 0
        while cur > 0 and steps < width - 1:
            length = np.int64(back[c, cur])
            end = cur - 1
            if not (length == 1 and BG[c, end]):
                if seen:
                    out[c] += abs(right - S2[c, end, length - 1] - 1)
                right = S1[c, end, length - 1]
                seen = True
            cur -= length
            steps += 1
    return out


@njit(cache=True, nogil=True)
def forward_table(indptr, indices, data, terms, n_rows):
    """The forward table of :class:`cqa_search.translation.scoring._QueryTables`: the
    entries of the columns ``terms`` of a CSC matrix ``(data, indices, indptr)`` with
    ``n_rows`` rows, grouped by row in increasing row order, each group in the order of
    ``terms`` then of the column (a stable counting sort: two passes where numpy gathers
    and sorts). Returns ``(n_distinct, f_map, f_indptr, f_term, f_prob)``: ``f_map[r]``
    the compact id of row ``r`` (``n_distinct`` for a row in no column), ``f_indptr``
    (``n_distinct + 2``) the groups' bounds, ``f_term`` the position in ``terms`` and
    ``f_prob`` the value (float64) of each entry."""
    f_map = np.full(n_rows, -1, dtype=np.int64)
    n = 0
    for j in range(terms.shape[0]):
        t = terms[j]
        n += indptr[t + 1] - indptr[t]
        for q in range(indptr[t], indptr[t + 1]):
            f_map[indices[q]] = 0
    n_distinct = 0
    for r in range(n_rows):
        if f_map[r] == 0:
            f_map[r] = n_distinct
            n_distinct += 1
        else:
            f_map[r] = -1
    for r in range(n_rows):
        if f_map[r] < 0:
            f_map[r] = n_distinct
    f_indptr = np.zeros(n_distinct + 2, dtype=np.int64)
    for j in range(terms.shape[0]):
        t = terms[j]
        for q in range(indptr[t], indptr[t + 1]):
            f_indptr[f_map[indices[q]] + 1] += 1
    for k in range(n_distinct + 1):
        f_indptr[k + 1] += f_indptr[k]
    at = f_indptr[:-1].copy()
    f_term = np.empty(n, dtype=np.int64)
    f_prob = np.empty(n, dtype=np.float64)
    for j in range(terms.shape[0]):
        t = terms[j]
        for q in range(indptr[t], indptr[t + 1]):
            c = f_map[indices[q]]
            p = at[c]
            f_term[p] = j
            f_prob[p] = data[q]
            at[c] = p + 1
    return n_distinct, f_map, f_indptr, f_term, f_prob


@njit(cache=True, nogil=True)
def scatter_max(out, idx, values):
    """``np.maximum.at(out, idx, values)``, in place."""
    for i in range(idx.shape[0]):
        if values[i] > out[idx[i]]:
            out[idx[i]] = values[i]


# -- the sentence encoder's passes over token rows (cqa_search.vectors._bert) ---------------
# Reassociation lets LLVM vectorise the row loops; no assumption on NaN or infinity.
_FAST = {"contract", "reassoc", "nsz", "arcp"}
_HALF = np.float32(0.5)
_ONE = np.float32(1.0)
_SQRT_HALF = np.float32(0.7071067811865476)


@njit(cache=True, nogil=True, fastmath=_FAST)
def gelu_bias(h, bias, numerator, denominator, clamp):
    """``h = GELU(h + bias)`` in place, erf by the rational function of
    ``numerator``/``denominator`` (float32, highest power first) on ``[-clamp, clamp]``;
    each row through row-long buffers, so that every inner loop is a vector loop."""
    n, m = h.shape
    u = np.empty(m, dtype=np.float32)
    u2 = np.empty(m, dtype=np.float32)
    p = np.empty(m, dtype=np.float32)
    q = np.empty(m, dtype=np.float32)
    for i in range(n):
        row = h[i]
        for j in range(m):
            v = row[j] + bias[j]
            row[j] = v
            w = min(max(v * _SQRT_HALF, -clamp), clamp)
            u[j] = w
            u2[j] = w * w
            p[j] = numerator[0]
            q[j] = denominator[0]
        for c in range(1, numerator.shape[0]):
            a = numerator[c]
            for j in range(m):
                p[j] = p[j] * u2[j] + a
        for c in range(1, denominator.shape[0]):
            a = denominator[c]
            for j in range(m):
                q[j] = q[j] * u2[j] + a
        for j in range(m):
            row[j] = _HALF * row[j] * (_ONE + u[j] * p[j] / q[j])


@njit(cache=True, nogil=True, fastmath=_FAST)
def add_layer_norm(x, y, bias, gamma, beta, eps):
    """``x = LayerNorm(x + y + bias)`` in place, row by row (sums in float64)."""
    n, m = x.shape
    for i in range(n):
        row = x[i]
        other = y[i]
        s = 0.0
        for j in range(m):
            v = row[j] + other[j] + bias[j]
            row[j] = v
            s += v
        mean = np.float32(s / m)
        ss = 0.0
        for j in range(m):
            d = row[j] - mean
            row[j] = d
            ss += d * d
        inv = np.float32(1.0 / np.sqrt(ss / m + eps))
        for j in range(m):
            row[j] = row[j] * inv * gamma[j] + beta[j]


_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693359375)
_LN2_LO = np.float32(-2.12194440e-4)
_EXP_FLOOR = np.float32(-87.0)
# Cephes' expf: e^r = 1 + r + r^2 P(r) on [-ln2/2, ln2/2] (relative error ~1e-7)
_EXP_P0 = np.float32(1.9875691500e-4)
_EXP_P1 = np.float32(1.3981999507e-3)
_EXP_P2 = np.float32(8.3334519073e-3)
_EXP_P3 = np.float32(4.1665795894e-2)
_EXP_P4 = np.float32(1.6666665459e-1)
_EXP_P5 = np.float32(5.0000001201e-1)


@njit(cache=True, nogil=True, fastmath=_FAST)
def softmax_keys(scores, lengths):
    """Softmax of each row of ``scores`` (float32 ``(b, heads, n, n)``) over its first
    ``lengths[b]`` keys, in place; the other keys and the rows past the length get 0.
    exp is Cephes' expf spelled out so that the row loops vectorise (numba calls libm's
    scalar expf)."""
    nb, nh, n, _ = scores.shape
    powers = np.empty(n, dtype=np.int32)
    scale = powers.view(np.float32)
    for b in range(nb):
        m = lengths[b]
        for h in range(nh):
            for i in range(n):
                row = scores[b, h, i]
                if i >= m:
                    row[:] = 0
                    continue
                top = row[0]
                for j in range(1, m):
                    top = max(top, row[j])
                total = np.float32(0)
                for j in range(m):
                    x = max(row[j] - top, _EXP_FLOOR)
                    k = np.floor(x * _LOG2E + np.float32(0.5))
                    r = x - k * _LN2_HI - k * _LN2_LO
                    p = ((((_EXP_P0 * r + _EXP_P1) * r + _EXP_P2) * r + _EXP_P3) * r
                         + _EXP_P4) * r + _EXP_P5
                    row[j] = np.float32(1) + r + r * r * p
                    powers[j] = (np.int32(k) + np.int32(127)) << 23
                for j in range(m):
                    row[j] *= scale[j]
                    total += row[j]
                inv = np.float32(1) / total
                for j in range(m):
                    row[j] *= inv
                for j in range(m, n):
                    row[j] = 0
