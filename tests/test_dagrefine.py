"""Sharing-aware refinement: switches a class to an e-node that tree costs rank worse
but that reuses what the DAG already holds."""

from tidu.simplify.egraph.dagrefine import refine_dag

# classes: 0 = a, 1 = b, 2 = {f(g(a)), m(k(p(b)))}, 3 = root h(class 2, class 4),
# 4 = k(p(b)), 5 = g(a), 6 = p(b). Tree cost prefers f(g(a)) (2 < 3), but k(p(b)) is
# in the DAG anyway, so m(...) adds one node where f(g(a)) adds two.
NODE_CLS = [0, 1, 2, 2, 3, 4, 5, 6]
NODE_KIDS = [(), (), (5,), (4,), (2, 4), (6,), (0,), (1,)]
WEIGHT = [0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]


def dag_weight(best, roots):
    seen, stack = set(), list(roots)
    while stack:
        c = stack.pop()
        if c not in seen:
            seen.add(c)
            stack.extend(NODE_KIDS[best[c]])
    return sum(WEIGHT[best[c]] for c in seen)


def test_switches_to_the_node_that_reuses_a_shared_class():
    best = [0, 1, 2, 4, 5, 6, 7]  # class -> node; tree cost picks f(g(a)) for class 2
    assert dag_weight(best, [3]) == 5.0
    saved = refine_dag(best, NODE_CLS, NODE_KIDS, WEIGHT, [3])
    assert best[2] == 3 and saved == 1.0 and dag_weight(best, [3]) == 4.0


def test_keeps_a_choice_that_is_already_best_and_is_deterministic():
    best = [0, 1, 3, 4, 5, 6, 7]
    assert refine_dag(best, NODE_CLS, NODE_KIDS, WEIGHT, [3]) == 0.0
    assert best == [0, 1, 3, 4, 5, 6, 7]


def test_never_creates_a_cycle():
    # class 2 = {f(a), m(class 3)} but class 3 = h(class 2): m would close a cycle.
    node_cls = [0, 2, 2, 3]
    kids = [(), (0,), (3,), (2,)]
    best = [0, -1, 1, 3]
    refine_dag(best, node_cls, kids, [0.0, 5.0, 1.0, 1.0], [3])
    assert best[2] == 1


def test_never_chooses_an_operand_without_a_finite_choice():
    # class 2 = {p(class 3 = q(a)), r(class 4)} where class 4 only holds s(class 4): no
    # finite extraction. Freeing q(a) must not make r(class 4) look cheaper.
    node_cls = [0, 3, 2, 2, 1, 4, 5]
    kids = [(), (0,), (3,), (4,), (2,), (4,), ()]
    weight = [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    best = [0, 4, 2, 1, -1, 6]
    assert refine_dag(best, node_cls, kids, weight, [1]) == 0.0
    assert best == [0, 4, 2, 1, -1, 6]



def random_egraph(seed):
    """Classes with one to three e-nodes over mostly earlier classes, sometimes a later
    one (cycles); classes 0-2 are leaves."""
    import random

    rng = random.Random(seed)
    n_cls = rng.randrange(8, 80)
    node_cls, kids = [], []
    for c in range(n_cls):
        for _ in range(1 if c < 3 else rng.choice((1, 1, 2, 3))):
            node_cls.append(c)
            hi = n_cls if rng.random() < 0.1 else c
            kids.append(() if c < 3 else tuple(rng.randrange(hi) for _ in range(rng.choice((1, 2)))))
    return n_cls, node_cls, kids, [0.0 if not k else 1.0 for k in kids]


def reached(best, kids, roots):
    """Classes the choice reaches from the roots; fails on a cycle."""
    state = {}
    for r in roots:
        stack = [(r, iter(kids[best[r]]))]
        state[r] = 1
        while stack:
            c, it = stack[-1]
            for k in it:
                assert state.get(k) != 1, f"cycle through class {k}"
                if k not in state:
                    state[k] = 1
                    stack.append((k, iter(kids[best[k]])))
                    break
            else:
                state[c] = 2
                stack.pop()
    return set(state)


def test_with_the_settle_order_of_the_extractor_moves_stay_exact_and_acyclic():
    """refine_dag given the classes with several e-nodes and the extractor's settle
    order (what extraction passes) saves exactly what the DAG loses, and the choice
    stays acyclic, on random e-graphs with cycles."""
    from tidu.simplify.egraph.dagrefine import several_enodes
    from tidu.simplify.egraph.extract import _choose

    for seed in range(40):
        n_cls, node_cls, kids, weight = random_egraph(seed)
        best, _, order = _choose(n_cls, node_cls, lambda k: (0,), kids, weight)
        roots = [c for c in range(n_cls - 3, n_cls) if best[c] >= 0]
        before = sum(weight[best[c]] for c in reached(best, kids, roots))
        saved = refine_dag(best, node_cls, kids, weight, roots, groups=several_enodes(node_cls), order=order)
        after = sum(weight[best[c]] for c in reached(best, kids, roots))
        assert saved >= 0 and after == before - saved, seed
