"""Loaders on the real files (expected values recomputed here by hand-parsing lines) and on small inline files."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from shared_data import DATA, ENRON

from mdhom.datasets import load_arff, load_delimited, load_libsvm, read_mulan_xml

needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared datasets not found at {DATA}")


def _data_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


# ----------------------------------------------------------------------------------------- real files


def test_the_project_carries_its_test_data(monkeypatch):
    """The real files live in tests/data (a clone has no ../shared/datasets), small, each with its checksum and
    provenance in tests/data/README.md."""
    import hashlib
    import importlib
    import re

    import shared_data

    here = Path(__file__).resolve().parent / "data"
    monkeypatch.delenv("MDHOM_DATASETS", raising=False)
    assert importlib.reload(shared_data).DATA == here
    monkeypatch.undo()
    importlib.reload(shared_data)
    readme = (here / "README.md").read_text()
    sums = dict((name, digest) for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", readme, re.M))
    files = sorted(p.name for p in here.iterdir() if p.name != "README.md")
    assert files == sorted(sums), "every data file, and only those, is listed with its checksum"
    for name in files:
        assert hashlib.sha256((here / name).read_bytes()).hexdigest() == sums[name], name
        assert f"`{name}`" in readme, f"{name}: no provenance row"
    assert sum((here / n).stat().st_size for n in files) < 4 * 2**20




@needs_data
def test_agaricus_shapes_and_rows_match_hand_parse():
    X, y = load_libsvm(DATA / "agaricus.train.libsvm")
    Xt, yt = load_libsvm(DATA / "agaricus.test.libsvm")
    assert X.shape == (6513, 126) and Xt.shape == (1611, 126)
    assert X.dtype == np.float32 and y.dtype == np.float64
    assert set(np.unique(y)) == {0.0, 1.0}
    lines = _data_lines(DATA / "agaricus.train.libsvm")
    for i in (0, 1, 4000, 6512):
        tokens = lines[i].split()
        expected = np.zeros(126, dtype=np.float32)
        for token in tokens[1:]:
            k, v = token.split(":")
            expected[int(k) - 1] = float(v)
        assert y[i] == float(tokens[0])
        np.testing.assert_array_equal(X[i], expected)
    # absent entries are zeros, not missing
    assert not np.isnan(X).any()


@needs_data
def test_agaricus_sparse_equals_dense():
    X, y = load_libsvm(DATA / "agaricus.test.libsvm")
    S, ys = load_libsvm(DATA / "agaricus.test.libsvm", sparse=True)
    assert S.shape == X.shape and S.dtype == np.float32
    np.testing.assert_array_equal(S.toarray(), X)
    np.testing.assert_array_equal(ys, y)


@needs_data
def test_higgs_tsv_label_first_column():
    X, y = load_delimited(DATA / "higgs-7k.train.tsv")
    Xt, yt = load_delimited(DATA / "higgs-7k.test.tsv")
    assert X.shape == (7000, 28) and Xt.shape == (500, 28)
    assert X.dtype == np.float64 and y.dtype == np.float64
    lines = _data_lines(DATA / "higgs-7k.train.tsv")
    for i in (0, 3333, 6999):
        cells = [float(c) for c in lines[i].split("\t")]
        assert y[i] == cells[0]
        np.testing.assert_array_equal(X[i], cells[1:])


@needs_data
def test_emotions_arff_with_count_and_xml():
    X, Y, features, labels = load_arff(DATA / "emotions-predefined_training.arff", labels=6)
    assert X.shape == (391, 72) and Y.shape == (391, 6) and Y.dtype == np.int8
    assert labels == read_mulan_xml(DATA / "emotions.xml")
    assert len(features) == 72 and features[0] == "Mean_Acc1298_Mean_Mem40_Centroid"
    text = (DATA / "emotions-predefined_training.arff").read_text().splitlines()
    first = [line for line in text[text.index("@data") + 1 :] if line.strip()][0]
    cells = [float(c) for c in first.split(",")]
    np.testing.assert_allclose(X[0], cells[:72], rtol=0, atol=0)
    np.testing.assert_array_equal(Y[0], np.asarray(cells[72:], dtype=np.int8))
    Xt, Yt, _, labels_t = load_arff(DATA / "emotions-predefined_test.arff", labels=DATA / "emotions.xml")
    assert Xt.shape == (202, 72) and Yt.shape == (202, 6) and labels_t == labels


@needs_data
def test_enron_sparse_rows_match_hand_parse():
    X, Y, features, labels = load_arff(ENRON, labels=str(DATA / "enron.xml"))
    text = ENRON.read_text().splitlines()
    rows = [line for line in text[[t.lower() for t in text].index("@data") + 1 :] if line.strip()]
    assert len(rows) in (300, 1702)  # the project's subset (tests/data/README.md) or the whole file
    assert X.shape == (len(rows), 1001) and Y.shape == (len(rows), 53)
    assert labels == read_mulan_xml(DATA / "enron.xml") and len(labels) == 53
    names = [line.split()[1] for line in text if line.lower().startswith("@attribute")]
    for r in (0, 1, len(rows) - 1):
        full = np.zeros(len(names))
        for entry in rows[r].strip("{}").split(","):
            k, v = entry.split()
            full[int(k)] = float(v)
        by_name = dict(zip(names, full, strict=True))
        np.testing.assert_array_equal(X[r], [by_name[f] for f in features])
        np.testing.assert_array_equal(Y[r], [by_name[n] for n in labels])
    # the count form takes the last 53 attributes, in file order
    _, Y2, _, labels2 = load_arff(ENRON, labels=53)
    assert labels2 == names[-53:] and sorted(labels2) == sorted(labels)
    np.testing.assert_array_equal(Y2, Y[:, [labels.index(n) for n in labels2]])


# --------------------------------------------------------------------------------------- inline ARFF

ARFF_HEADER = """% comment
@RELATION 'toy data'
@attribute 'a b' numeric
@attribute "it's" {red, 'dark blue', green}
@attribute c REAL
@attribute lab1 {0,1}
@attribute lab2 {1,0}
@data
"""


def test_arff_sparse_and_dense_rows_agree(tmp_path):
    dense = ARFF_HEADER + "1.5,green,?,1,0\n0,red,0,0,1\n0,'dark blue',2,0,0\n5,red,0,0,1\n"
    sparse = ARFF_HEADER + "{0 1.5,1 green,2 ?,3 1,4 0}\n{4 1}\n{1 'dark blue', 2 2, 4 0}\n{0 5}\n"
    (tmp_path / "d.arff").write_text(dense)
    (tmp_path / "s.arff").write_text(sparse)
    Xd, Yd, fd, ld = load_arff(tmp_path / "d.arff", labels=2)
    Xs, Ys, fs, ls = load_arff(tmp_path / "s.arff", labels=2)
    assert fd == fs == ["a b", "it's", "c"] and ld == ls == ["lab1", "lab2"]
    np.testing.assert_array_equal(Xd, Xs)  # NaN == NaN under assert_array_equal
    np.testing.assert_array_equal(Yd, Ys)
    assert math.isnan(Xd[0, 2]) and Xd[0, 1] == 2.0 and Xd[2, 1] == 1.0
    # omitted sparse entries are 0 = first nominal value; lab2 is {1,0} so index 0 means label value 1
    assert Xs[1, 1] == 0.0
    np.testing.assert_array_equal(Yd, np.array([[1, 0], [0, 1], [0, 0], [0, 1]], dtype=np.int8))


def test_arff_label_list_and_single_target(tmp_path):
    (tmp_path / "t.arff").write_text(ARFF_HEADER + "1,red,3,1,1\n0,green,4,0,1\n")
    X, Y, features, labels = load_arff(tmp_path / "t.arff", labels=["lab2", "a b"])
    assert labels == ["lab2", "a b"] and features == ["it's", "c", "lab1"]
    np.testing.assert_array_equal(Y, [[1, 1], [1, 0]])  # any 0/1 attribute can be a label
    X, Y, features, labels = load_arff(tmp_path / "t.arff")
    assert labels == ["lab2"] and Y.shape == (2, 1) and X.shape == (2, 4)


def test_arff_multiclass_and_numeric_single_target(tmp_path):
    (tmp_path / "m.arff").write_text("@relation r\n@attribute x numeric\n@attribute y {a,b,c}\n@data\n1,c\n2,a\n")
    _, Y, _, _ = load_arff(tmp_path / "m.arff")
    assert Y.dtype == np.int8 and Y[:, 0].tolist() == [2, 0]
    (tmp_path / "n.arff").write_text("@relation r\n@attribute x numeric\n@attribute y numeric\n@data\n1,2.5\n2,-1\n")
    _, Y, _, _ = load_arff(tmp_path / "n.arff")
    assert Y.dtype == np.float64 and Y[:, 0].tolist() == [2.5, -1.0]


def test_arff_quoted_values_with_commas_and_escapes(tmp_path):
    text = "@relation r\n@attribute 'x, y' {'a,b', 'q\\'s'}\n@attribute t {0,1}\n@data\n'q\\'s',1\n'a,b',0\n"
    (tmp_path / "q.arff").write_text(text)
    X, Y, features, _ = load_arff(tmp_path / "q.arff")
    assert features == ["x, y"]
    assert X[:, 0].tolist() == [1.0, 0.0] and Y[:, 0].tolist() == [1, 0]


@pytest.mark.parametrize(
    "body, labels, message",
    [
        ("1,red,3,1\n", 2, ":10: 4 values where 5"),
        ("1,purple,3,1,0\n", 2, ":10: 'purple' is not a declared value"),
        ("x,red,3,1,0\n", 2, ":10: cannot read value 'x'"),
        ("{0 1, 9 1}\n", 2, ":10: sparse index 9"),
        ("{0 1, 2}\n", 2, ":10: sparse entry '2'"),
        ("1,red,3,?,0\n", 2, ":10: missing value for label 'lab1'"),
        ("1,'red,3,1,0\n", 2, ":10: unterminated quote"),
        ("1,red,3,1,0\n", ["nope"], "label attributes not in the file: nope"),
        ("1,red,3,1,0\n", 9, "labels=9"),
    ],
)
def test_arff_malformed(tmp_path, body, labels, message):
    path = tmp_path / "bad.arff"
    path.write_text(ARFF_HEADER + "\n" + body)
    with pytest.raises(ValueError) as info:
        load_arff(path, labels=labels)
    assert message in str(info.value) and "bad.arff" in str(info.value)


def test_arff_malformed_header(tmp_path):
    path = tmp_path / "h.arff"
    path.write_text("@relation r\n@attribute s string\n@data\n")
    with pytest.raises(ValueError, match=r"h\.arff:2: attribute 's' has type 'string'"):
        load_arff(path)
    path.write_text("@relation r\n@attribute x numeric\n")
    with pytest.raises(ValueError, match="no @data"):
        load_arff(path)


def test_multilabel_must_be_binary(tmp_path):
    path = tmp_path / "b.arff"
    path.write_text("@relation r\n@attribute x numeric\n@attribute l1 numeric\n@attribute l2 numeric\n@data\n1,0,2\n")
    with pytest.raises(ValueError, match=r"b\.arff:6: label 'l2' is 2.0"):
        load_arff(path, labels=2)


def test_mulan_xml(tmp_path):
    path = tmp_path / "l.xml"
    path.write_text(
        '<?xml version="1.0"?>\n<labels xmlns="http://mulan.sourceforge.net/labels">\n'
        '<label name="root"><label name="child"></label></label>\n<label name="b"/>\n</labels>\n'
    )
    assert read_mulan_xml(path) == ["root", "child", "b"]
    path.write_text("<labels><label name='a'></labels>")
    with pytest.raises(ValueError, match=r"l\.xml:1: not well-formed"):
        read_mulan_xml(path)


# ------------------------------------------------------------------------------------- inline LibSVM


def test_libsvm_zero_based_auto_and_explicit(tmp_path):
    path = tmp_path / "z.svm"
    path.write_text("# header comment\n1 0:2.5 3:1\n-1 qid:7 1:-1 # trailing\n\n+1\n")
    X, y = load_libsvm(path)
    assert X.shape == (3, 4) and y.tolist() == [1.0, -1.0, 1.0]
    np.testing.assert_array_equal(X, [[2.5, 0, 0, 1], [0, -1, 0, 0], [0, 0, 0, 0]])
    with pytest.raises(ValueError, match=r"z\.svm:2: feature id 0"):
        load_libsvm(path, zero_based=False)
    one = tmp_path / "one.svm"
    one.write_text("0 1:1 2:2\n1 2:3\n")
    X1, _ = load_libsvm(one)
    np.testing.assert_array_equal(X1, [[1, 2], [0, 3]])
    X0, _ = load_libsvm(one, zero_based=True)
    assert X0.shape == (2, 3)


def test_libsvm_n_features_pads_and_checks(tmp_path):
    path = tmp_path / "p.svm"
    path.write_text("1 1:1\n0 3:2\n")
    X, _ = load_libsvm(path, n_features=10)
    assert X.shape == (2, 10) and X[1, 2] == 2.0
    S, _ = load_libsvm(path, n_features=10, sparse=True)
    assert S.shape == (2, 10)
    with pytest.raises(ValueError, match=r"p\.svm:2: feature id beyond n_features=2"):
        load_libsvm(path, n_features=2)


@pytest.mark.parametrize(
    "text, message",
    [
        ("1 1:1\nx 2:1\n", ":2: cannot read label 'x'"),
        ("1 1:1\n0 2\n", ":2: expected 'index:value'"),
        ("1 1:1\n0 a:1\n", ":2: feature id 'a'"),
        ("1 1:1\n0 2:b\n", ":2: cannot read value 'b'"),
        ("1 1:1\n\n0 2:1 2:3\n", ":3: feature id repeated"),
    ],
)
def test_libsvm_malformed(tmp_path, text, message):
    path = tmp_path / "bad.svm"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        load_libsvm(path)
    assert message in str(info.value) and "bad.svm" in str(info.value)


def test_missing_file_passes_through(tmp_path):
    for load in (load_libsvm, load_delimited, load_arff, read_mulan_xml):
        with pytest.raises(FileNotFoundError):
            load(tmp_path / "absent")


# ---------------------------------------------------------------------------------- inline delimited


def test_delimited_header_missing_and_target_by_name(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('x1,"x 2",label\n1,NA,0\n2,,1\n?,nan,1\n3.5,4,0\n')
    X, y = load_delimited(path, target="label")
    assert X.shape == (4, 2) and y.tolist() == [0, 1, 1, 0]
    assert np.isnan(X[:, 1][:3]).all() and np.isnan(X[2, 0]) and X[3].tolist() == [3.5, 4.0]
    X2, y2 = load_delimited(path, target=-1)
    np.testing.assert_array_equal(X2, X)
    np.testing.assert_array_equal(y2, y)


def test_delimited_no_header_and_sniffing(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("1 2 3\n4  5 6\n")
    X, y = load_delimited(path, target=1)
    assert y.tolist() == [2, 5] and X.tolist() == [[1, 3], [4, 6]]
    semi = tmp_path / "t.dat"
    semi.write_text("a;b\n1;2\n")
    X, y = load_delimited(semi, target="b")
    assert X.tolist() == [[1.0]] and y.tolist() == [2.0]
    forced = tmp_path / "f.tsv"
    forced.write_text("1\t2\n3\t4\n")
    X, y = load_delimited(forced, header=True)
    assert X.tolist() == [[4.0]] and y.tolist() == [3.0]


@pytest.mark.parametrize(
    "text, kwargs, message",
    [
        ("1,2\n3,4,5\n", {}, "t.csv:2: 3 cells where earlier rows have 2"),
        ("1,2\n3,x\n", {}, "t.csv:2: cannot read cell 'x'"),
        ("1,2\n,4\n", {}, "t.csv:2: missing target value"),
        ("1,2\n", {"target": "y"}, "no header"),
        ("1,2\n", {"target": 5}, "out of range"),
        ("", {}, "no data rows"),
    ],
)
def test_delimited_malformed(tmp_path, text, kwargs, message):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        load_delimited(path, **kwargs)
