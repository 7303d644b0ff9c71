"""The walk's table layout: each function's reading node strided by its own stride, its values
adjacent, and an expansion's labels and heuristics equal to the tables they come from."""

from __future__ import annotations

import numpy as np
import pytest

from dcop.backends import resolve_backend
from dcop.bucketpass import bucket_pass
from dcop.generators import random_network
from dcop.orders.choose import choose_order
from dcop.search import kernel
from dcop.search.compile import compile_search, new_state


def _value(m: kernel.Model, f: int, asg: np.ndarray) -> float:
    """Function ``f`` of the model at ``asg``, read entry by entry from its scope."""
    at = int(m.f_off[f])
    for i in range(int(m.f_sc[f]), int(m.f_sc[f + 1])):
        at += int(asg[m.sc_var[i]]) * int(m.sc_stride[i])
    return float(m.tables[at])


@pytest.mark.parametrize("seed", range(3))
def test_each_function_is_read_at_stride_one_by_the_node_that_steps_through_it(seed: int) -> None:
    problem = random_network(12, 4, 0.4, 0.2, seed=seed)
    engine = resolve_backend("numpy")
    order = choose_order(problem, "minfill").order
    buckets = bucket_pass(problem, order, engine, 3, dtype=np.float64, match=True)
    m = compile_search(problem, order, buckets, engine, 1e8, z=3).model
    for v in range(m.dom.shape[0]):
        for k in range(m.lab_off[v], m.lab_off[v + 1]):
            f = m.lab_fun[k]
            scope = list(m.sc_var[m.f_sc[f] : m.f_sc[f + 1]])
            assert scope[-1] == v and m.lab_sv[k] == 1
        for k in range(m.cr_off[v], m.cr_off[v + 1]):
            f = m.cr_fun[k]
            scope = list(m.sc_var[m.f_sc[f] : m.f_sc[f + 1]])
            if m.parent[v] in scope:  # it lands in the parent's bucket: stepped through there
                assert scope[-1] == m.parent[v] and m.cr_sv[k] == 1
            else:  # it passes through: one entry read
                assert m.cr_sv[k] == 0


@pytest.mark.parametrize("seed", range(3))
def test_an_expansion_sums_its_labels_and_childrens_heuristics_entry_by_entry(seed: int) -> None:
    problem = random_network(12, 4, 0.4, 0.2, seed=seed)
    engine = resolve_backend("numpy")
    order = choose_order(problem, "minfill").order
    buckets = bucket_pass(problem, order, engine, 3, dtype=np.float64, match=True)
    c = compile_search(problem, order, buckets, engine, 1e8, z=3)
    m = c.model
    s = new_state(m, c.width, c.cache_entries)
    rng = np.random.default_rng(seed)
    for _ in range(5):
        s.asg[:] = rng.integers(0, m.dom)
        for v in range(m.dom.shape[0]):
            kernel.expand(m, s, v, c.width)
            asg = s.asg.copy()
            for x in range(int(m.dom[v])):
                asg[v] = x
                lab = sum(_value(m, f, asg) for f in m.lab_fun[m.lab_off[v] : m.lab_off[v + 1]])
                h = 0.0
                for ch in m.ch_list[m.ch_off[v] : m.ch_off[v + 1]]:
                    part = sum(_value(m, f, asg) for f in m.cr_fun[m.cr_off[ch] : m.cr_off[ch + 1]])
                    assert s.hcx[ch * c.width + x] == pytest.approx(part, rel=1e-12, abs=1e-12)
                    h += part
                assert s.lab[v * c.width + x] == pytest.approx(lab, rel=1e-12, abs=1e-12)
                assert s.fval[v * c.width + x] == pytest.approx(lab + h, rel=1e-12, abs=1e-12)
            ranked = [
                s.fval[v * c.width + int(x)] for x in s.vals[v * c.width : v * c.width + m.dom[v]]
            ]
            assert ranked == sorted(ranked)
