"""The chunk kernel (``dpframe.data._chunkc``) against the numpy path: a streamed chunk
converted, checked and clipped in one pass gives the same matrix, bit for bit, the same
clip report and the same sentence for an invalid value; and a streamed pass uses it."""

from __future__ import annotations

import numpy as np
import pytest

from dpframe import Classes, Domain, Target
from dpframe.data import chunks
from dpframe.data.chunks import Buffers, Columns
from dpframe.data.sources import SourceDataset, open_source, prepare_chunk
from dpframe.errors import DataError


@pytest.fixture(params=["c", "numpy"])
def kernel(request, monkeypatch) -> str:
    """Run a test on the chunk kernel and again on the numpy path (``chunks._kernel``
    None; the kernel's run is skipped where it is not built)."""
    if request.param == "numpy":
        monkeypatch.setattr(chunks, "_kernel", None)
    elif chunks._kernel is None:
        pytest.skip("the chunk kernel is not built")
    return request.param


needs_kernel = pytest.mark.skipif(
    chunks._kernel is None, reason="the chunk kernel (dpframe.data._chunkc) is not built"
)

DOMAINS = {
    "one pair of bounds": Domain(lower=-1.0, upper=1.0),
    "bounds per feature, zero bounds": Domain(
        lower=[-1.0, 0.0, -0.0, -300.0, 5.0], upper=[1.0, 2.5, 1.0, -0.0, 5.0]
    ),
    "bounds -0.0 and +0.0": Domain(lower=[-1.0, -0.0, 0, 0, 0], upper=[1.0, 0.0, 1, 1, 1]),
    "a box and a row-norm bound": Domain(lower=-1.0, upper=1.0, row_norm_bound=1.5),
    "a row-norm bound alone": Domain(row_norm_bound=2.0),
    "no bounds": Domain(),
}
WIDTH = 5


class _Counting:
    """The kernel, counting its calls and their outcomes."""

    def __init__(self, kernel) -> None:
        self.kernel, self.statuses = kernel, []

    def prepare(self, *args):
        result = self.kernel.prepare(*args)
        self.statuses.append(result[0])
        return result

    def extremes(self, values):
        return self.kernel.extremes(values)


def _prepare(path: str, monkeypatch, *args, **kwargs):
    """prepare_chunk through the kernel (``"c"``) or numpy; the outcome or the error."""
    with monkeypatch.context() as patch:
        if path == "numpy":
            patch.setattr(chunks, "_kernel", None)
        try:
            return prepare_chunk(*args, **kwargs)
        except DataError as exc:
            return str(exc)


def _assert_same(expected, actual) -> None:
    if isinstance(expected, str):
        assert actual == expected
        return
    assert not isinstance(actual, str), actual
    (x0, y0, report0), (x1, y1, report1) = expected, actual
    assert x1.dtype == np.float64 and x1.flags.c_contiguous and x1.shape == x0.shape
    assert np.array_equal(x1.view(np.int64), x0.view(np.int64))  # bit for bit
    assert (y0 is None and y1 is None) or np.array_equal(y0, y1)
    assert report1 == report0


def _values(rng: np.random.Generator, rows: int, kind: str) -> np.ndarray:
    """Values crossing every bound of DOMAINS, with exact bounds and zeros of both signs."""
    if kind in "fd":
        x = rng.uniform(-400.0, 400.0, rows) * rng.choice([1e-3, 1.0], rows)
        x[rng.random(rows) < 0.2] = rng.choice([-1.0, 1.0, 0.0, -0.0, 2.5, 5.0, -300.0])
        return x.astype(np.float32 if kind == "f" else np.float64)
    info = np.iinfo(np.dtype(kind))
    x = rng.integers(max(info.min, -400), min(info.max, 400), rows, dtype=kind, endpoint=True)
    x[rng.random(rows) < 0.1] = info.max if rng.random() < 0.5 else info.min
    return x


def _columns(rng: np.random.Generator, rows: int) -> Columns:
    kinds = ["f", "d", "b", "h", "i", "q", "B", "H", "I", "Q"]
    values = [_values(rng, rows, kind) for kind in rng.choice(kinds, WIDTH)]
    if rng.random() < 0.3:  # an integer beyond 2^53: rounded as numpy rounds it
        values[0] = np.full(rows, 2**53 + 1, dtype=np.int64)
    return Columns([Columns.column(v, rows) for v in values], rows)


@needs_kernel
@pytest.mark.parametrize("domain_name", list(DOMAINS))
def test_the_kernel_prepares_columns_as_numpy_does(domain_name, monkeypatch):
    domain = DOMAINS[domain_name].bind(WIDTH)
    rng = np.random.default_rng(list(DOMAINS).index(domain_name))
    counting = _Counting(chunks._kernel)
    monkeypatch.setattr(chunks, "_kernel", counting)
    for rows in (1, 31, 32, 33, 100, 257):
        for _ in range(6):
            features = _columns(rng, rows)
            args = (domain, WIDTH, features, None, 40)
            _assert_same(_prepare("numpy", monkeypatch, *args), _prepare("c", monkeypatch, *args))
    answered = counting.statuses.count(0)
    if domain_name == "bounds -0.0 and +0.0":  # a value below -0.0 may become either zero
        assert answered == 0 and set(counting.statuses) == {2}
    elif domain_name == "bounds per feature, zero bounds":  # a zero of the other sign on a
        assert answered and 2 in counting.statuses  # zero bound is left to numpy, no other
        assert answered + counting.statuses.count(2) == len(counting.statuses)
    else:
        assert answered == len(counting.statuses)


@needs_kernel
@pytest.mark.parametrize("domain_name", list(DOMAINS))
@pytest.mark.parametrize("layout", ["C", "F", "float32", "int64", "big-endian"])
def test_the_kernel_prepares_arrays_as_numpy_does(domain_name, layout, monkeypatch):
    domain = DOMAINS[domain_name].bind(WIDTH)
    rng = np.random.default_rng(11)
    x = np.stack([_values(rng, 70, "d") for _ in range(WIDTH)], axis=1)
    x = {
        "C": x,
        "F": np.asfortranarray(x),
        "float32": x.astype(np.float32),
        "int64": x.astype(np.int64),
        "big-endian": x.astype(">f8"),
    }[layout]
    for copy in (True, False):
        expected = _prepare("numpy", monkeypatch, domain, WIDTH, x.copy(order="K"), None, 0)
        given = x.copy(order="K")
        actual = _prepare("c", monkeypatch, domain, WIDTH, given, None, 0, copy=copy)
        _assert_same(expected, actual)
        if copy:
            assert not np.shares_memory(actual[0], given)


@needs_kernel
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("domain_name", ["one pair of bounds", "a row-norm bound alone"])
def test_an_invalid_value_gets_the_numpy_sentence(bad, domain_name, monkeypatch):
    domain = DOMAINS[domain_name].bind(WIDTH)
    rng = np.random.default_rng(5)
    for row, column in ((0, 0), (40, 3), (69, 4)):
        values = [rng.uniform(-2, 2, 70).astype(np.float32) for _ in range(WIDTH)]
        values[column][row] = bad
        values[1][row + 1 :] = np.nan  # a later one is not the one named
        features = Columns(values, 70)
        message = _prepare("c", monkeypatch, domain, WIDTH, features, None, 1000)
        assert message == _prepare("numpy", monkeypatch, domain, WIDTH, features, None, 1000)
        assert f"column 'x{column}'" in message and f"data row {1000 + row + 1};" in message


@needs_kernel
def test_a_value_is_refused_before_a_label(monkeypatch):
    domain = Domain(lower=-1.0, upper=1.0, labels=Classes((0, 1))).bind(2)
    features = Columns([np.array([0.5, np.inf]), np.array([0.0, 0.0])], 2)
    labels = np.array([0, 7])
    for path in ("c", "numpy"):
        assert "infinite value at data row 2" in _prepare(
            path, monkeypatch, domain, 2, features, labels, 0
        )
    features = Columns([np.array([0.5, 3.0]), np.array([0.0, 0.0])], 2)
    for path in ("c", "numpy"):
        assert "label 7" in _prepare(path, monkeypatch, domain, 2, features, labels, 0)
    target = Domain(lower=-1.0, upper=1.0, labels=Target(0.0, 1.0)).bind(2)
    expected = _prepare("numpy", monkeypatch, target, 2, features, np.array([0.5, 9.0]), 0)
    actual = _prepare("c", monkeypatch, target, 2, features, np.array([0.5, 9.0]), 0)
    _assert_same(expected, actual)
    assert actual[2].labels_clipped == 1 and actual[2].rows_clipped_to_box == 1


@needs_kernel
@pytest.mark.parametrize("kind", ["csv", "parquet"])
@pytest.mark.parametrize("chunk_rows", [None, 500, 333])
def test_a_streamed_pass_uses_the_kernel_and_reads_what_numpy_reads(
    kind, chunk_rows, files, domain, monkeypatch
):
    def chunks_of(path: str):
        dataset = SourceDataset(open_source(files[kind], domain), domain, chunk_rows=chunk_rows)
        with monkeypatch.context() as patch:
            if path == "numpy":
                patch.setattr(chunks, "_kernel", None)
            read = [(x.copy(), y.copy()) for x, y in dataset.chunks(256)]
        return read, dataset.clip_report

    counting = _Counting(chunks._kernel)
    monkeypatch.setattr(chunks, "_kernel", counting)
    (kernel_read, kernel_report) = chunks_of("c")
    (numpy_read, numpy_report) = chunks_of("numpy")
    assert counting.statuses == [0] * len(kernel_read)  # every chunk, none left to numpy
    assert len(kernel_read) == len(numpy_read) == -(-3000 // min(256, chunk_rows or 256))
    for (x0, y0), (x1, y1) in zip(numpy_read, kernel_read, strict=True):
        assert np.array_equal(x1.view(np.int64), x0.view(np.int64)) and np.array_equal(y0, y1)
    assert kernel_report == numpy_report and kernel_report.rows_clipped_to_box > 0


def test_columns_are_cut_and_joined_as_rows():
    a = Columns([np.arange(5.0), np.arange(5, dtype=np.int16)], 5)
    b = Columns([np.arange(3.0), np.arange(3, dtype=np.int16)], 3)
    joined = Columns.concatenate([a[2:], b[:2]])
    assert len(joined) == 5 and joined.shape == (5, 2)
    assert np.array_equal(joined.to_array(), [[2, 2], [3, 3], [4, 4], [0, 0], [1, 1]])
    assert len(a[4:9]) == 1 and len(a[6:]) == 0


def test_a_buffer_is_reused_only_when_nothing_else_holds_it():
    pool = Buffers(limit=2)
    first = pool.take((4, 3))
    first.setflags(write=False)  # as a pass hands its chunks out
    kept = first[1:].T  # a view holds the buffer too
    address = id(first)
    del first
    second = pool.take((4, 3))
    assert id(second) != address and not np.shares_memory(second, kept)
    del kept
    third = pool.take((4, 3))
    assert id(third) == address and third.flags.writeable  # nothing holds it any more
    hashed = memoryview(third)  # as the fingerprint's hash holds a chunk
    del third, second
    fourth = pool.take((4, 3))
    assert not np.shares_memory(fourth, np.asarray(hashed))
    assert pool.take((5, 3)).shape == (5, 3)  # another shape: new memory (beyond the limit)


@needs_kernel
def test_a_chunk_still_held_is_never_written_again(files, domain):
    dataset = SourceDataset(open_source(files["parquet"], domain), domain, chunk_rows=None)
    held, views = [], []
    for number, (x, _) in enumerate(dataset.chunks(64)):
        if number % 3 == 0:
            held.append((x, x.copy()))
        elif number % 3 == 1:
            views.append((x[5:9].T, x[5:9].T.copy()))  # only a view of it is kept
    assert len(held) > 10 and len(views) > 10
    for kept, values in held + views:
        assert np.array_equal(kept, values)


@needs_kernel
def test_a_pass_reuses_the_chunks_it_no_longer_holds(files, domain, monkeypatch):
    taken = []
    take = Buffers.take

    def spy(self, shape):
        known = {id(b) for b in self._held}
        buffer = take(self, shape)
        taken.append(id(buffer) in known)
        return buffer

    monkeypatch.setattr(Buffers, "take", spy)
    dataset = SourceDataset(open_source(files["parquet"], domain), domain)
    assert sum(float(x[0, 0]) for x, _ in dataset.chunks(64)) != 0
    assert len(taken) == -(-3000 // 64) and sum(taken) > len(taken) // 2


# -- the extremes of an in-memory chunk (a deferred Dataset's check, one read) ------------


@needs_kernel
@pytest.mark.parametrize("size", [1, 3, 15, 16, 17, 33, 1000, 8195])
def test_the_kernel_extremes_are_numpys(size):
    """Every length around the 16-value step of the AVX2 loop and its tail, with the
    extremes at the first, a middle, the last and a tail position."""
    rng = np.random.default_rng(size)
    for where in {0, size // 2, size - 1, max(0, size - 3)}:
        for extreme in (1e300, -1e300, 5e-324, -0.0):
            x = rng.normal(size=size)
            x[where] = extreme
            status, low, high = chunks._kernel.extremes(x)
            assert (status, low, high) == (0, x.min(), x.max()), (where, extreme)
            assert chunks.extremes(x.reshape(1, -1)) == (x.min(), x.max())


@needs_kernel
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("size", [1, 16, 17, 40])
def test_the_kernel_reports_every_non_finite_position(bad, size):
    for where in range(size):
        x = np.linspace(-1.0, 1.0, size)
        x[where] = bad
        assert chunks._kernel.extremes(x)[0] == 1, where
        low, high = chunks.extremes(x)  # numpy's answer, which shows the value
        assert not (np.isfinite(low) and np.isfinite(high))


def test_extremes_of_what_the_kernel_does_not_read_are_numpys(monkeypatch):
    x = np.arange(24.0).reshape(4, 6)
    for view in (x[:, ::2], x.T, x.astype(np.float32), x.astype(">f8"), x.astype(np.int64)):
        assert chunks.extremes(view) == (float(view.min()), float(view.max()))
    with pytest.raises(ValueError):  # an empty chunk is numpy's error too
        chunks.extremes(np.empty((0, 3)))
    monkeypatch.setattr(chunks, "_kernel", None)
    assert chunks.extremes(x) == (0.0, 23.0)


def test_a_deferred_dataset_is_checked_through_the_kernels_extremes(monkeypatch):
    """The caller's array is checked as a release reads it, through the one-read
    extremes, which still find a NaN and a value outside the domain."""
    from dpframe import Dataset

    calls = []
    real = chunks.extremes

    def counting(x):
        calls.append(x.shape)
        return real(x)

    monkeypatch.setattr("dpframe.data.dataset.extremes", counting)
    domain = Domain(lower=-1.0, upper=1.0)
    x = np.zeros((10, 3))
    x[7, 1] = 3.0
    data = Dataset.from_arrays(x, domain=domain)
    assert data.inside() is False and calls
    # a release's first pass: its chunks are checked on the fingerprint's thread
    from dpframe.data.dataset import Fingerprinter

    calls.clear()
    rows = np.zeros((40_000, 3))
    checker = Fingerprinter(None, len(rows), 3, check=domain.bind(3), deferred=True)
    for start in range(0, len(rows), 8192):
        checker.update(rows[start : start + 8192], None)
    checker.end_of_pass()
    assert checker.inside() and len(calls) == 5
    checker.close()
    x[2, 2] = np.nan
    with pytest.raises(DataError, match=r"column 'x2' has a missing \(NaN\) value at data row 3"):
        Dataset.from_arrays(x, domain=domain).inside()


def test_a_failing_check_thread_raises_its_error_to_the_caller_instead_of_hanging():
    # The check on the fingerprint's thread fails (here: a domain never bound to data):
    # the chunks that follow, and the end of the pass, get its error; nothing waits
    # forever (the producer runs on a thread of its own so that a hang fails the test).
    import threading

    from dpframe.data.dataset import Fingerprinter

    rows = np.zeros((200_000, 3))
    checker = Fingerprinter(None, len(rows), 3, check=Domain(lower=-1.0, upper=1.0), backlog=1)
    raised = []

    def produce() -> None:
        try:
            for start in range(0, len(rows), 1000):
                checker.update(rows[start : start + 1000], None)
            checker.end_of_pass()
            checker.inside()
        except Exception as exc:
            raised.append(exc)
        try:
            checker.hexdigest()
        except Exception as exc:
            raised.append(exc)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    producer.join(60)  # a guard against a hang, not a measure of speed
    assert not producer.is_alive(), "the producer waits forever on a dead thread"
    assert len(raised) == 2
    assert all("feature count is not known" in str(exc) for exc in raised)


# -- per-class sums of an in-memory chunk (DPRP's label blocks, one read) -----------------


def _grouped_by_hand(x, codes, groups):
    """Each class's rows summed one after the other in row order, written out."""
    sums, counts = np.zeros((groups, x.shape[1])), np.zeros(groups, dtype=np.int64)
    for row, code in zip(x, codes, strict=True):
        sums[code] = sums[code] + row
        counts[code] += 1
    return sums, counts


@needs_kernel
@pytest.mark.parametrize("d", [1, 3, 4, 5, 8, 103])
@pytest.mark.parametrize("mapped", [False, True])
def test_the_kernel_grouped_sums_are_the_row_order_sums(monkeypatch, d, mapped):
    """Widths around the AVX2 loop's four values and its tail, with and without the map
    ``(x - centre) / scale``: the mapped rows are numpy's, the sums are the row-order sums
    bit for bit on the kernel's path and on numpy's (classes with no row included), and
    the extremes are numpy's."""
    rng = np.random.default_rng(d)
    x = rng.normal(size=(301, d)) * 10.0 ** rng.integers(-8, 8, (301, d))
    x[17, d - 1], x[200, 0] = 1e300, -0.0
    codes = rng.integers(0, 4, 301)  # group 4 of 5 is empty
    centre, scale = rng.normal(size=d), rng.uniform(0.1, 3.0, d)
    u = (x - centre) / scale if mapped else x
    sums, counts = _grouped_by_hand(u, codes, 5)
    options = {"centre": centre, "scale": scale, "out": np.empty_like(x)} if mapped else {}
    found = chunks.grouped_sums(x, codes, 5, **options)
    assert np.array_equal(found[0], u) and (found[0] is options["out"] if mapped else True)
    assert np.array_equal(found[1], sums) and np.array_equal(found[2], counts)
    assert found[3:] == (u.min(), u.max())
    ungrouped = chunks.grouped_sums(x, **options)
    assert ungrouped[1].shape == (0, d) and ungrouped[3:] == found[3:]
    monkeypatch.setattr(chunks, "_kernel", None)
    options = {**options, "out": np.empty_like(x)} if mapped else {}
    numpy = chunks.grouped_sums(x, codes, 5, **options)
    assert np.array_equal(numpy[0], u)
    assert np.array_equal(numpy[1], sums) and np.array_equal(numpy[2], counts)
    assert numpy[3:] == found[3:]


def test_grouped_sums_refuse_a_code_outside_the_groups_and_show_a_nan(kernel):
    x = np.ones((6, 3))
    for bad in (-1, 3):
        with pytest.raises(ValueError, match=r"outside 0 \.\. 2"):
            chunks.grouped_sums(x, np.array([0, 1, bad, 2, 0, 1]), 3)
    x[4, 2] = np.nan
    _, sums, counts, low, high = chunks.grouped_sums(x, np.array([0, 1, 2, 2, 0, 1]), 3)
    assert np.isnan(low) and np.isnan(high) and np.isnan(sums[0, 2])
    assert counts.tolist() == [2, 2, 2]
    x[4, 2] = 10.0  # a finite value whose map overflows: shown as numpy's map shows it
    out = np.empty_like(x)
    with np.errstate(over="ignore"):  # numpy's divide says so; the kernel's status does
        mapped = chunks.grouped_sums(x, centre=np.zeros(3), scale=np.full(3, 1e-308), out=out)
    assert mapped[0] is out and np.isinf(mapped[4])
    empty = chunks.grouped_sums(np.empty((0, 3)), np.empty(0, dtype=np.int64), 3)
    assert empty[3:] == (np.inf, -np.inf) and not empty[1].any() and not empty[2].any()


def _sums_and_norms_by_hand(x: np.ndarray) -> tuple[np.ndarray, float]:
    """Column sums, 0.0 plus every row added in order; each row's squares added in column
    order; written out one value at a time."""
    sums = [0.0] * x.shape[1]
    largest = -np.inf
    for row in x:
        sums = [s + float(v) for s, v in zip(sums, row, strict=True)]
        square = float(row[0]) * float(row[0])
        for v in row[1:]:
            square += float(v) * float(v)
        largest = max(largest, square)
    return np.array(sums), largest


@pytest.mark.parametrize(
    ("n", "d"), [(1, 1), (1, 5), (7, 3), (8, 4), (9, 1), (25, 103), (40, 1), (40, 2)]
)
def test_sums_and_largest_norm_are_the_in_order_sums(kernel, n, d):
    """Row counts around the kernel's blocks of eight rows (the first row apart, a tail),
    widths around its vector loop: the column sums are the row-order sums bit for bit
    (numpy's ``sum(axis=0)`` when ``d >= 2``; one column numpy adds pairwise), the largest
    squared norm the column-order one, on either path (compared bit for bit: a column of
    negative zeros sums to +0.0, as numpy's does)."""
    rng = np.random.default_rng(n * 1000 + d)
    x = rng.normal(size=(n, d)) * 10.0 ** rng.integers(-8, 8, (n, d))
    if n < 40:
        x[:, 0] = -0.0
    sums, largest = chunks.sums_and_largest_norm(x)
    expected_sums, expected_largest = _sums_and_norms_by_hand(x)
    bits = sums.view(np.int64)
    assert np.array_equal(bits, expected_sums.view(np.int64))
    if d > 1:
        assert np.array_equal(bits, x.sum(axis=0).view(np.int64))
    assert not np.signbit(sums[0]) and largest == expected_largest


@pytest.mark.parametrize(("n", "d"), [(1, 1), (7, 3), (8, 4), (9, 1), (25, 103)])
def test_scaled_offsets_are_two_roundings_and_column_order_norms(kernel, n, d):
    """``scaled_offsets``: each entry ``x * inverse - point`` rounded twice (numpy's multiply
    then subtract), each row's norm its squares added in column order then ``sqrt``
    (written out one value at a time), bit for bit on either path, into a separate buffer
    or in place; a zero scale gives the point's negation, and an infinite value is
    answered by numpy (NaN or infinite norms, as numpy gives them)."""
    rng = np.random.default_rng(n * 100 + d)
    x = rng.normal(size=(n, d)) * 10.0 ** rng.integers(-8, 8, (n, d))
    inverse = rng.random(n)
    inverse[0] = 0.0
    point = rng.normal(size=d)
    out = np.empty((n, d))
    norms = chunks.scaled_offsets(x, inverse, point, out)
    for i in range(n):
        row = [float(x[i, j]) * float(inverse[i]) - float(point[j]) for j in range(d)]
        square = row[0] * row[0]
        for value in row[1:]:
            square += value * value
        assert np.array_equal(out[i].view(np.int64), np.array(row).view(np.int64)), i
        assert norms[i] == np.sqrt(square), i
    assert np.array_equal(out[0], -point)
    in_place = x.copy()
    assert np.array_equal(chunks.scaled_offsets(in_place, inverse, point, in_place), norms)
    assert np.array_equal(in_place, out)
    x[n // 2, 0] = np.inf
    inverse[n // 2] = 1.0
    assert not np.isfinite(chunks.scaled_offsets(x, inverse, point, out)[n // 2])


@pytest.mark.parametrize(
    ("n", "d", "classes"), [(1, 1, 1), (9, 1, 3), (40, 1, 2), (25, 103, 4), (300, 7, 5)]
)
def test_rows_grouped_by_class_with_in_order_sums(kernel, n, d, classes):
    """``group_rows``: each class's rows in their order (a stable sort by class), its count,
    and its column sums added row by row from 0.0 (written out one value at a time), bit
    for bit on either path; a class with no rows sums to zeros, a column of negative zeros
    to +0.0; a code outside the classes is refused."""
    rng = np.random.default_rng(n * 1000 + d * 10 + classes)
    x = rng.normal(size=(n, d)) * 10.0 ** rng.integers(-8, 8, (n, d))
    x[: n // 3, 0] = -0.0
    codes = rng.integers(0, max(1, classes - 1), n)  # the last class has no rows
    out = np.empty((n, d))
    counts, sums = chunks.group_rows(x, codes, classes, out)
    assert counts == [int((codes == k).sum()) for k in range(classes)]
    order = [i for k in range(classes) for i in range(n) if codes[i] == k]
    assert np.array_equal(out.view(np.int64), x[order].view(np.int64))
    for k in range(classes):
        by_hand, _ = _sums_and_norms_by_hand(x[codes == k]) if counts[k] else (np.zeros(d), 0)
        assert np.array_equal(sums[k].view(np.int64), by_hand.view(np.int64)), k
    with pytest.raises(ValueError, match="outside"):
        chunks.group_rows(x, np.full(n, classes), classes, out)


def test_sums_and_largest_norm_show_a_nan_as_numpy_does(kernel):
    x = np.ones((20, 3))
    x[11, 1] = np.nan
    sums, largest = chunks.sums_and_largest_norm(x)
    assert np.isnan(sums[1]) and sums[0] == 20.0 and np.isnan(largest)
