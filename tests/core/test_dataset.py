"""Datasets and loaders: validation with one sentence naming the row or column."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from fingerprint_reference import gmac_tag, reference_mac

import dpframe.data.dataset as dataset_module
from dpframe.data.dataset import Dataset
from dpframe.data.domain import Classes, Domain, Target
from dpframe.data.fingerprint import FingerprintKey
from dpframe.data.loaders import load_dataset
from dpframe.errors import DataError, DomainError

CLASSES = Domain(lower=0, upper=10, labels=Classes((1, 2), "y"))


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_csv_with_header_and_label_by_name(tmp_path):
    path = write(tmp_path, "d.csv", "a,b,y\n1,2,1\n3,40,2\n5,6,1\n")
    data = load_dataset(path, CLASSES)
    assert data.features.tolist() == [[1, 2], [3, 10], [5, 6]]  # 40 clipped to 10
    assert data.labels.tolist() == [0, 1, 0]
    assert data.label_values(data.labels).tolist() == [1, 2, 1]
    assert data.domain.feature_names == ("a", "b")
    assert data.domain.records == 3
    assert data.clip_report.rows_clipped_to_box == 1
    assert not data.features.flags.writeable


def test_csv_without_header_label_by_index_and_gzip(tmp_path):
    path = tmp_path / "d.csv.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("1;2;2\n3;4;1\n")
    data = load_dataset(path, Domain(lower=0, upper=10, labels=Classes((1, 2))), label="2")
    assert data.features.tolist() == [[1, 2], [3, 4]]
    assert data.labels.tolist() == [1, 0]


@pytest.mark.parametrize("damage", ["truncated", "not gzip"])
def test_a_damaged_gzip_file_is_a_data_error(tmp_path, damage):
    # EOFError and BadGzipFile came out as internal errors, exit 70 (fuzzing, stop 41)
    path = tmp_path / "d.csv.gz"
    whole = gzip.compress(b"a,b\n" + b"0.1,0.2\n" * 1000)
    path.write_bytes(whole[: len(whole) // 2] if damage == "truncated" else b"garbage")
    with pytest.raises(DataError, match=r"cannot read d\.csv\.gz"):
        load_dataset(path, Domain(lower=0, upper=1))


def test_csv_with_old_mac_line_ends_and_a_csv_the_reader_refuses(tmp_path):
    # fuzzing, stop 43: lone carriage returns, and the csv module's errors, were exit 70
    path = tmp_path / "d.csv"
    path.write_bytes(b"a,b\r1,2\r3,4\r")
    assert load_dataset(path, Domain(lower=0, upper=5)).features.tolist() == [[1, 2], [3, 4]]
    path.write_text('a,b\n1,"' + "9" * 200_000 + '"\n')  # beyond the reader's field limit
    with pytest.raises(DataError, match=r"d\.csv could not be read as CSV: field larger"):
        load_dataset(path, Domain(lower=0, upper=5))


def test_a_repeated_column_name_is_refused_not_read_as_the_first(tmp_path):
    path = write(tmp_path, "d.csv", "a,b,a\n1,2,9\n3,4,9\n")
    for names in (("a", "b"), None):
        with pytest.raises(DataError, match=r"d\.csv has 2 columns named 'a'"):
            load_dataset(path, Domain(lower=0, upper=10, feature_names=names))


def test_space_separated_with_explicit_no_header(tmp_path):
    path = write(tmp_path, "d.txt", "1 2\n3 4\n")
    data = load_dataset(path, Domain(lower=0, upper=5), header=False)
    assert data.features.shape == (2, 2)


def test_domain_feature_names_select_columns(tmp_path):
    path = write(tmp_path, "d.csv", "sex,a,b,y\nM,1,2,1\nF,3,4,2\n")
    domain = Domain(lower=0, upper=10, feature_names=("b", "a"), labels=Classes((1, 2), "y"))
    data = load_dataset(path, domain)
    assert data.features.tolist() == [[2, 1], [4, 3]]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a,b\n1,2\n3,nan\n", "column 'b' has a missing (NaN) value at data row 2"),
        ("a,b\n1,2\n3,\n", "column 'b' has a missing value at data row 2"),
        ("a,b\n1,inf\n3,4\n", "column 'b' has an infinite value at data row 1"),
        ("a,b\n1,2\n3,x\n", "column 'b' has a non-numeric value 'x' at data row 2"),
        ("a,b\n1,2\n3,4,5\n", "data row 2 has 3 fields but the header has 2"),
        ("a,b\n", "has a header but no records"),
        ("", "is empty"),
    ],
)
def test_bad_csv_gives_one_sentence(tmp_path, text, fragment):
    path = write(tmp_path, "d.csv", text)
    with pytest.raises(DataError) as info:  # a NaN or inf: when the values are first read
        load_dataset(path, Domain(lower=0, upper=10)).settle()
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_label_outside_declared_classes_names_the_row(tmp_path):
    path = write(tmp_path, "d.csv", "a,y\n1,1\n2,3\n")
    with pytest.raises(DataError, match=r"data row 2 has label '3'.*declared classes"):
        load_dataset(path, CLASSES)


def test_unknown_label_column_and_file_type(tmp_path):
    path = write(tmp_path, "d.csv", "a,y\n1,1\n")
    with pytest.raises(DataError, match="label column 'z' is not in the data"):
        load_dataset(path, CLASSES, label="z")
    with pytest.raises(DataError, match="no loader reads"):
        load_dataset(write(tmp_path, "d.xlsx", "x"), CLASSES)
    with pytest.raises(DataError, match="does not exist"):
        load_dataset(tmp_path / "missing.csv", CLASSES)


def test_numpy_files(tmp_path):
    np.save(tmp_path / "d.npy", np.array([[1.0, 2.0, 1.0], [3.0, 4.0, 2.0]]))
    data = load_dataset(tmp_path / "d.npy", CLASSES, label=2)
    assert data.features.tolist() == [[1, 2], [3, 4]] and data.labels.tolist() == [0, 1]
    np.savez(tmp_path / "d.npz", X=np.ones((3, 2)), y=np.array([2, 2, 1]))
    data = load_dataset(tmp_path / "d.npz", CLASSES)
    assert data.labels.tolist() == [1, 1, 0]
    np.savez(tmp_path / "bad.npz", other=np.ones(2))
    with pytest.raises(DataError, match="no array named"):
        load_dataset(tmp_path / "bad.npz", CLASSES)
    # fuzzing, stop 43: an array of Python objects, or a damaged archive, was exit 70
    np.savez(tmp_path / "objects.npz", X=np.ones((2, 2)), y=np.array([1, 2], dtype=object))
    (tmp_path / "damaged.npz").write_bytes(b"PK\x03\x04garbage")
    for name in ("objects.npz", "damaged.npz"):
        with pytest.raises(DataError, match=rf"{name} is not a readable numpy file"):
            load_dataset(tmp_path / name, CLASSES)


def test_dataframe():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [1.0, 2.0], "s": ["x", "y"], "y": [1, 2]})
    domain = Domain(lower=0, upper=5, feature_names=("a",), labels=Classes((1, 2), "y"))
    data = Dataset.from_dataframe(frame, domain)
    assert data.features.tolist() == [[1.0], [2.0]] and data.labels.tolist() == [0, 1]
    with pytest.raises(DataError, match="column 's' has a non-numeric value 'x' at data row 1"):
        Dataset.from_dataframe(frame, Domain(lower=0, upper=5, labels=Classes((1, 2), "y")))


def test_arrays_reject_empty_and_mismatched_labels():
    with pytest.raises(DataError, match="no records"):
        Dataset.from_arrays(np.empty((0, 2)))
    with pytest.raises(DataError, match="3 labels for 2 records"):
        Dataset.from_arrays(np.ones((2, 2)), [1, 1, 2], CLASSES)
    # two label columns said "there are 2 labels for 2 records" (fuzzing, stop 41)
    with pytest.raises(DataError, match=r"one column .* got an array of shape \(2, 2\)"):
        Dataset.from_arrays(np.ones((2, 2)), [[1, 2], [2, 1]], CLASSES)
    with pytest.raises(DataError, match="declares no label kind"):
        Dataset.from_arrays(np.ones((2, 2)), [1, 1])
    with pytest.raises(DomainError, match="describes 3 features"):
        Dataset.from_arrays(np.ones((2, 2)), None, Domain(lower=[0, 0, 0], upper=[1, 1, 1]))


def test_target_labels_are_clipped_and_counted():
    data = Dataset.from_arrays(np.ones((3, 1)), [0.5, 7.0, -2.0], Domain(labels=Target(0, 5)))
    assert data.labels.tolist() == [0.5, 5.0, 0.0]
    assert data.clip_report.labels_clipped == 2


def test_fingerprint_is_keyed_and_content_based():
    x = np.arange(12.0).reshape(6, 2)
    a = Dataset.from_arrays(x)
    b = Dataset.from_arrays(x.copy())
    c = Dataset.from_arrays(x + np.eye(6, 2))
    key, other = b"k" * 32, b"o" * 32
    assert a.fingerprint(key) == b.fingerprint(key)
    assert a.fingerprint(key) != c.fingerprint(key)
    assert a.fingerprint(key) != a.fingerprint(other)


@pytest.mark.parametrize("scheme", ["gmac-blake3", "blake3-keyed", "hmac-sha256"])
def test_fingerprint_does_not_depend_on_chunking(scheme):
    x = np.arange(30_000.0).reshape(10_000, 3)
    data = Dataset.from_arrays(x)
    key = FingerprintKey(b"k" * 32, scheme)
    assert data.fingerprint(key) == data.fingerprint(key, chunk_rows=999)


def test_the_three_fingerprint_schemes_give_different_values_and_bytes_mean_gmac_blake3():
    data = Dataset.from_arrays(np.arange(12.0).reshape(6, 2))
    secret = b"k" * 32
    new = FingerprintKey(secret)
    older = [FingerprintKey(secret, scheme) for scheme in ("blake3-keyed", "hmac-sha256")]
    assert new.scheme == "gmac-blake3"
    values = {data.fingerprint(key) for key in [new, *older]}
    assert data.fingerprint(secret) == data.fingerprint(new) and len(values) == 3
    assert "<secret>" in repr(new) and "kkkk" not in repr(new)
    with pytest.raises(ValueError, match="unknown fingerprint scheme"):
        FingerprintKey(secret, "md5")
    with pytest.raises(ValueError, match="32-byte key"):
        FingerprintKey(b"short", "gmac-blake3")


def test_the_reference_gmac_is_the_standard_one():
    """The tests' GHASH (written from SP 800-38D) gives OpenSSL's GCM tags of data with no
    plaintext, and test case 13 of the GCM specification (McGrew and Viega)."""
    assert gmac_tag(bytes(32), bytes(12), b"").hex() == "530f8afbc74536b9a963b4f1c4cb738b"
    rng = np.random.default_rng(0)
    for size in (1, 15, 16, 17, 1000):
        key, aad = rng.bytes(32), rng.bytes(size)
        assert gmac_tag(key, bytes(12), aad) == AESGCM(key).encrypt(bytes(12), b"", aad)


@pytest.mark.parametrize("scheme", ["gmac-blake3", "blake3-keyed", "hmac-sha256"])
def test_each_scheme_is_its_specification(scheme):
    """Each scheme's streamed hash (in uneven pieces) is the keyed hash its specification
    defines, and it depends on the data (a flipped bit) and on the secret."""
    rng = np.random.default_rng(1)
    data = rng.bytes(5000)
    key = FingerprintKey(rng.bytes(32), scheme)
    streamed = key.new()
    for start, stop in ((0, 7), (7, 4096), (4096, 5000)):
        streamed.update(memoryview(data)[start:stop])
    assert streamed.digest() == reference_mac(key)(data)
    flipped = bytes([data[0] ^ 1]) + data[1:]
    assert reference_mac(key)(flipped) != reference_mac(key)(data)
    other = FingerprintKey(rng.bytes(32), scheme)
    assert reference_mac(other)(data) != reference_mac(key)(data)


def test_the_gmac_tags_linearity_does_not_reach_the_fingerprint():
    """The attack the PRF layer stops: GMAC tags of same-length inputs are affine in the
    input, so anyone shown them could check linear relations between datasets (here
    ``tag(a) ^ tag(b) ^ tag(c) == tag(a ^ b ^ c)``, which the bare tags satisfy); the
    scheme's values, keyed BLAKE3 of the tags, satisfy no such relation."""
    rng = np.random.default_rng(2)
    a, b, c = (rng.bytes(4096) for _ in range(3))
    d = bytes(p ^ q ^ r for p, q, r in zip(a, b, c, strict=True))

    def xor(*values: bytes) -> bytes:
        return bytes(np.bitwise_xor.reduce([np.frombuffer(v, np.uint8) for v in values]))

    gmac_key = rng.bytes(32)
    tags = [gmac_tag(gmac_key, bytes(12), m) for m in (a, b, c, d)]
    assert xor(*tags[:3]) == tags[3]  # the attack works on bare GMAC
    key = FingerprintKey(rng.bytes(32))
    values = []
    for m in (a, b, c, d):
        mac = key.new()
        mac.update(m)
        values.append(mac.digest())
    assert xor(*values[:3]) != values[3]


def test_a_finalised_gmac_blake3_hash_takes_no_more_bytes():
    mac = FingerprintKey(b"k" * 32).new()
    mac.update(b"records")
    assert mac.digest() == mac.digest() and mac.hexdigest() == mac.digest().hex()
    with pytest.raises(ValueError, match="finalised"):
        mac.update(b"more")


def test_real_dataset_loads_with_declared_domain(datasets_dir):
    domain = Domain(
        lower=[50, 0, 0, 0, 0],
        upper=[110, 150, 160, 160, 300],
        feature_names=("mcv", "alkphos", "sgpt", "sgot", "gammagt"),
        labels=Target(0, 20, "drinks"),
    )
    data = load_dataset(datasets_dir / "liver_disorders" / "bupa.data", domain)
    assert data.n_records == 345 and data.n_features == 5
    assert data.labels.max() <= 20


# -- construction reads the caller's array once and never writes it ---------------------


def test_an_in_domain_float64_array_is_wrapped_not_copied_and_never_written():
    x = np.random.default_rng(0).uniform(-1, 1, (1000, 4))
    before = x.copy()
    data = Dataset.from_arrays(x, None, Domain(lower=-1, upper=1))
    assert np.shares_memory(data.features, x)
    assert not data.features.flags.writeable
    assert x.flags.writeable  # the caller's array keeps its flags
    assert np.array_equal(x, before)
    assert data.clip_report.total == 0
    assert data.clip_report.values_clipped_per_feature == (0, 0, 0, 0)


def test_an_array_that_needs_clipping_is_copied_once_and_the_callers_array_is_unchanged():
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (150_000, 3))  # three chunks; values outside only in the last
    x[140_000, 1] = 5.0
    x[149_999, 2] = -7.0
    before = x.copy()
    domain = Domain(lower=[-1, -1, -2], upper=[1, 1, 2])
    data = Dataset.from_arrays(x, None, domain)
    assert not np.shares_memory(data.features, x)
    assert np.array_equal(x, before)
    expected = np.clip(before, [-1, -1, -2], [1, 1, 2])
    assert np.array_equal(data.features, expected)
    assert data.clip_report.rows_clipped_to_box == 2
    assert data.clip_report.values_clipped_per_feature == (0, 1, 1)
    assert data.clip_report.records == 150_000


def test_rows_outside_the_norm_ball_are_scaled_in_a_copy():
    x = np.zeros((70_000, 2))
    x[69_999] = [3.0, 4.0]  # norm 5, in the second chunk
    data = Dataset.from_arrays(x, None, Domain(row_norm_bound=1.0))
    assert not np.shares_memory(data.features, x)
    assert x[69_999].tolist() == [3.0, 4.0]
    assert np.allclose(data.features[69_999], [0.6, 0.8])
    assert data.clip_report.rows_clipped_to_norm == 1


def test_a_nan_in_a_later_chunk_names_its_data_row():
    x = np.zeros((70_000, 2))
    x[68_000, 1] = np.nan
    nan = r"column 'x1' has a missing \(NaN\) value at data row 68001"
    with pytest.raises(DataError, match=nan):  # a copy is checked when it is made
        Dataset.from_arrays(x, None, Domain(lower=-1, upper=1), copy=True)
    deferred = Dataset.from_arrays(x, None, Domain(lower=-1, upper=1))
    with pytest.raises(DataError, match=nan):  # the caller's array: when it is read
        deferred.fingerprint(b"k" * 32)
    with pytest.raises(DataError, match=nan):
        deferred.settle()
    x[68_000, 1] = np.inf
    with pytest.raises(DataError, match="an infinite value at data row 68001"):
        Dataset.from_arrays(x).settle()  # no bounds: the extremes still show it


@pytest.fixture(params=["inline", "threaded"])
def fingerprint_thread(request, monkeypatch):
    """Both ways a Fingerprinter works: on the caller's thread (small records, the
    default here) and on a thread of its own (forced for these small records)."""
    if request.param == "threaded":
        monkeypatch.setattr(dataset_module, "INLINE_VALUES", 0)
    return request.param


def test_small_records_are_fingerprinted_alike_on_the_caller_s_thread(monkeypatch):
    x = np.random.default_rng(7).uniform(-2, 2, (300, 4))
    labels = np.arange(300) % 2
    domain = Domain(lower=-1, upper=1, labels=Classes((0, 1)))
    key = b"k" * 32
    values = []
    for inline in (10**9, 0):
        monkeypatch.setattr(dataset_module, "INLINE_VALUES", inline)
        for copy in (False, True):
            data = Dataset.from_arrays(x, labels, domain, copy=copy)
            values.append((data.fingerprint(key), data.fingerprint(key, chunk_rows=7)))
    assert len(set(values)) == 1


def test_the_caller_s_float64_array_is_wrapped_unread_and_checked_as_it_is_read(
    fingerprint_thread,
):
    x = np.random.default_rng(5).uniform(-1, 1, (20_000, 3))
    x[[3, 9_000, 19_999], [0, 2, 1]] = [4.0, -9.0, 2.5]  # outside [-1, 1], three chunks
    domain = Domain(lower=-1, upper=1)
    data = Dataset.from_arrays(x, None, domain)
    copied = Dataset.from_arrays(x, None, domain, copy=True)  # checked and clipped now
    assert data.deferred and not copied.deferred
    assert np.shares_memory(data._features, x)  # construction made no copy
    key = b"k" * 32
    assert data.fingerprint(key) == copied.fingerprint(key)  # clipped chunks as read
    chunks = np.concatenate([f for f, _ in data.chunks(8192)])
    assert np.array_equal(chunks, np.clip(x, -1, 1))
    assert x[3, 0] == 4.0  # the caller's array is never written
    assert data.deferred  # reading chunks does not settle it
    assert data.clip_report == copied.clip_report  # reading the report does
    assert not data.deferred and np.array_equal(data.features, copied.features)
    assert data.clip_report.values_clipped_per_feature == (1, 1, 1)


def test_changing_the_wrapped_array_afterwards_is_checked_or_refused_at_the_next_fingerprint(
    fingerprint_thread,
):
    x = np.random.default_rng(2).uniform(0, 1, (100, 3))
    data = Dataset.from_arrays(x, None, Domain(lower=0, upper=1))
    settled = Dataset.from_arrays(x, None, Domain(lower=0, upper=1))
    settled.settle()  # checked once, still wrapping x: later changes are refused
    copied = Dataset.from_arrays(x, None, Domain(lower=0, upper=1), copy=True)
    key = b"k" * 32
    assert data.fingerprint(key) == settled.fingerprint(key) == copied.fingerprint(key)
    x[50, 1] = 40.0  # outside the domain, through the caller's own array
    with pytest.raises(DataError, match="changed after the Dataset was built"):
        settled.fingerprint(key)
    clipped = x.copy()
    clipped[50, 1] = 1.0
    # a deferred Dataset checks what it reads: the changed value is clipped like any other
    assert data.fingerprint(key) == Dataset.from_arrays(clipped, None, data.domain).fingerprint(key)
    x[50, 1] = np.nan
    with pytest.raises(DataError, match="missing \\(NaN\\) value at data row 51"):
        data.fingerprint(key)
    assert not np.shares_memory(copied.features, x)
    assert copied.features[50, 1] <= 1.0
    copied.fingerprint(key)  # the copy is unaffected


def test_domain_contains_is_exact_for_per_feature_bounds_and_non_finite_values():
    domain = Domain(lower=[0, -5], upper=[1, 5]).bind(2)
    assert domain.contains(np.array([[0.5, -4.0], [1.0, 5.0]]))
    assert not domain.contains(np.array([[0.5, 1.5], [2.0, 0.0]]))  # 2 > 1 in feature 0
    assert not domain.contains(np.array([[0.5, np.nan]]))
    assert not Domain().bind(1).contains(np.array([[np.inf]]))
    box = Domain(lower=-1.0, upper=1.0).bind(2)  # one pair of bounds: the extremes decide
    assert box.contains(np.array([[-1.0, 1.0], [0.0, 0.5]]))
    assert not box.contains(np.array([[-1.0, np.nextafter(1.0, 2.0)]]))
    assert not box.contains(np.array([[np.nextafter(-1.0, -2.0), 0.0]]))
    ball = Domain(row_norm_bound=5.0).bind(2)
    assert ball.contains(np.array([[3.0, 4.0]]))
    assert not ball.contains(np.array([[3.0, 4.0001]]))


def test_array_columns_named_otherwise_than_the_domain_are_refused():
    # bounds apply by position: columns [c, b, a] under a domain [a, b, c] were clipped to
    # the wrong bounds without a word (fuzzing, stop 41)
    domain = Domain(lower=0.0, upper=[1.0, 10.0, 100.0], feature_names=["a", "b", "c"])
    x = np.column_stack([np.full(5, 90.0), np.full(5, 9.0), np.full(5, 0.9)])
    with pytest.raises(DataError, match=r"columns are \['c', 'b', 'a'\] but the domain"):
        Dataset.from_arrays(x, None, domain, feature_names=["c", "b", "a"])
    same = Dataset.from_arrays(x[:, ::-1], None, domain, feature_names=["a", "b", "c"])
    assert same.features[0].tolist() == [0.9, 9.0, 90.0]
