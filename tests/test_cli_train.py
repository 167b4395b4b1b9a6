"""``mdhom train`` and ``mdhom predict`` on small files in every supported format."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from shared_data import DATA as _DATA

import mdhom
from mdhom.cli import main

DATA = str(_DATA)


def _csv(path, X, y, header=True, sep=","):
    with open(path, "w") as f:
        if header:
            f.write(sep.join(["label"] + [f"x{i}" for i in range(X.shape[1])]) + "\n")
        for row, t in zip(X, y, strict=True):
            f.write(sep.join([str(t)] + ["" if np.isnan(v) else repr(float(v)) for v in row]) + "\n")


@pytest.fixture
def table(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) > 0).astype(int)
    _csv(tmp_path / "train.csv", X, y)
    return tmp_path, X, y


def test_train_then_predict_csv(table, capsys):
    tmp, X, y = table
    model = tmp / "m.json"
    assert main(["train", "--data", str(tmp / "train.csv"), "--target", "label", "--n-estimators", "12",
                 "--max_depth", "3", "--learning-rate", "0.3", "--device", "numpy", "--model", str(model)]) == 0
    assert "12 rounds" in capsys.readouterr().out
    doc = json.loads(model.read_text())
    assert doc["params"]["n_estimators"] == 12 and doc["params"]["max_depth"] == 3
    assert doc["params"]["device"] == "numpy"
    out = tmp / "pred.txt"
    assert main(["predict", "--model", str(model), "--data", str(tmp / "train.csv"), "--target", "label",
                 "--out", str(out)]) == 0
    assert "accuracy" in capsys.readouterr().err
    pred = np.array([int(v) for v in out.read_text().split()])
    est = mdhom.load_model(model)
    assert np.array_equal(pred, est.predict(X))
    assert main(["predict", "--model", str(model), "--data", str(tmp / "train.csv"), "--target", "label",
                 "--proba"]) == 0
    proba = np.array([[float(v) for v in line.split(",")] for line in capsys.readouterr().out.split()])
    assert np.allclose(proba, est.predict_proba(X))


def test_predict_on_features_only_file(table, capsys):
    tmp, X, y = table
    main(["train", "--data", str(tmp / "train.csv"), "--target", "label", "--n-estimators", "5",
          "--device", "numpy", "--model", str(tmp / "m.json")])
    with open(tmp / "features.csv", "w") as f:
        for row in X:
            f.write(",".join("nan" if np.isnan(v) else repr(float(v)) for v in row) + "\n")
    capsys.readouterr()
    assert main(["predict", "--model", str(tmp / "m.json"), "--data", str(tmp / "features.csv")]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.split()) == 300 and "accuracy" not in captured.err


def test_regression_objective_and_tsv(tmp_path, capsys):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3))
    y = 2 * X[:, 0] - X[:, 2]
    _csv(tmp_path / "r.tsv", X, y, header=False, sep="\t")
    assert main(["train", "--data", str(tmp_path / "r.tsv"), "--objective", "regression", "--n-estimators", "30",
                 "--device", "numpy", "--model", str(tmp_path / "r.json")]) == 0
    assert isinstance(mdhom.load_model(tmp_path / "r.json"), mdhom.TreeBoostRegressor)
    capsys.readouterr()
    assert main(["predict", "--model", str(tmp_path / "r.json"), "--data", str(tmp_path / "r.tsv")]) == 0
    assert "rmse" in capsys.readouterr().err


@pytest.mark.skipif(not os.path.isdir(DATA), reason="shared datasets not found")
def test_libsvm_and_arff_multilabel(tmp_path, capsys):
    model = tmp_path / "a.json"
    assert main(["train", "--data", os.path.join(DATA, "agaricus.train.libsvm"), "--n-estimators", "5",
                 "--device", "numpy", "--model", str(model)]) == 0
    capsys.readouterr()
    assert main(["predict", "--model", str(model), "--data", os.path.join(DATA, "agaricus.test.libsvm")]) == 0
    err = capsys.readouterr().err
    assert float(err.split()[1]) > 0.99
    xml = os.path.join(DATA, "emotions.xml")
    assert main(["train", "--data", os.path.join(DATA, "emotions-predefined_training.arff"), "--labels", xml,
                 "--n-estimators", "5", "--max-depth", "2", "--device", "numpy", "--model", str(tmp_path / "e.json")]) == 0
    capsys.readouterr()
    assert main(["predict", "--model", str(tmp_path / "e.json"), "--labels", xml,
                 "--data", os.path.join(DATA, "emotions-predefined_test.arff")]) == 0
    lines = capsys.readouterr().out.split()
    assert len(lines) == 202 and all(len(line.split(",")) == 6 for line in lines)


def test_errors_are_reported_not_raised(table, capsys):
    tmp, _, _ = table
    assert main(["train", "--data", str(tmp / "train.csv"), "--target", "label", "--max-bin", "70000",
                 "--model", str(tmp / "m.json")]) == 2
    assert "max_bin" in capsys.readouterr().err
    (tmp / "data.xyz").write_text("1,2\n")
    assert main(["train", "--data", str(tmp / "data.xyz"), "--model", str(tmp / "m.json")]) == 2
    assert "--format" in capsys.readouterr().err
    (tmp / "bad.json").write_text("{")
    assert main(["predict", "--model", str(tmp / "bad.json"), "--data", str(tmp / "train.csv")]) == 2
    assert "corrupt" in capsys.readouterr().err


def test_new_options_are_flags(table, capsys):
    tmp, X, y = table
    model = tmp / "m.json"
    _csv(tmp / "valid.csv", X[:100], y[:100])
    assert main(["train", "--data", str(tmp / "train.csv"), "--target", "label", "--n-estimators", "4",
                 "--eval-data", str(tmp / "valid.csv"), "--eval-metric", "logloss,auc", "--importance-type", "cover",
                 "--max-depth", "-1", "--max-leaves", "8", "--n-jobs", "1", "--device", "numpy",
                 "--model", str(model)]) == 0
    params = json.loads(model.read_text())["params"]
    assert params["eval_metric"] == ["logloss", "auc"] and params["importance_type"] == "cover"
    assert params["max_depth"] == -1 and params["n_jobs"] == 1
    assert main(["train", "--data", str(tmp / "train.csv"), "--target", "label", "--eval-metric", "rmse",
                 "--device", "numpy", "--model", str(model)]) == 2
    assert "'rmse' does not apply to objective 'binary:logistic'" in capsys.readouterr().err


def _emotions():
    return (os.path.join(DATA, "emotions-predefined_training.arff"), os.path.join(DATA, "emotions-predefined_test.arff"),
            os.path.join(DATA, "emotions.xml"))


def test_rules_on_multilabel_arff(tmp_path, capsys):
    """Several labels and no tree option: --learner auto fits RuleBoostClassifier; predict reads its model."""
    train, test, xml = _emotions()
    model = tmp_path / "r.json"
    assert main(["train", "--data", train, "--labels", xml, "--max-rules", "15", "--model", str(model)]) == 0
    assert "trained RuleBoostClassifier" in capsys.readouterr().out
    est = mdhom.load_model(model)
    assert isinstance(est, mdhom.RuleBoostClassifier) and len(est.rules_) == 14
    out = tmp_path / "p.txt"
    assert main(["predict", "--model", str(model), "--data", test, "--labels", xml, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "hamming" in err and "micro-f1" in err
    from mdhom.datasets import load_arff

    Xt, Yt, _, _ = load_arff(test, labels=xml)
    P = np.array([[int(v) for v in line.split(",")] for line in out.read_text().split()])
    np.testing.assert_array_equal(P, est.predict(Xt))
    assert float(err.split()[1]) == pytest.approx((P != Yt).mean(), abs=1e-6)
    assert main(["predict", "--model", str(model), "--data", test, "--labels", xml, "--proba"]) == 0
    proba = np.array([[float(v) for v in line.split(",")] for line in capsys.readouterr().out.split()])
    np.testing.assert_allclose(proba, est.predict_proba(Xt))


def test_every_rule_option_is_a_flag(tmp_path):
    train, _, xml = _emotions()
    model = tmp_path / "r.json"
    assert main(["train", "--data", train, "--labels", xml, "--learner", "rules", "--max-rules", "12",
                 "--shrinkage", "0.5", "--l1-regularization-weight", "0.1", "--l2_regularization_weight", "0.5",
                 "--loss", "logistic_examplewise", "--head-type", "single", "--binary-predictor", "output-wise",
                 "--label-binning", "none",
                 "--feature-binning", "equal-width:8", "--feature-sampling", "none", "--instance-sampling", "0.8",
                 "--label-sampling", "0.5", "--max-conditions", "2", "--min-coverage", "3", "--random-state", "4",
                 "--holdout", "random:0.25", "--global-pruning", "post-pruning{min_rules=5,interval=2}",
                 "--device", "numpy", "--precision", "double", "--model", str(model)]) == 0
    params = json.loads(model.read_text())["params"]
    from mdhom.rules.options import TABLE

    assert set(params) == set(TABLE.by_name)
    assert params == {"max_rules": 12, "shrinkage": 0.5, "l1_regularization_weight": 0.1,
                      "l2_regularization_weight": 0.5, "loss": "logistic_examplewise", "head_type": "single",
                      "label_binning": "none", "binary_predictor": "output-wise", "feature_binning": ["equal-width", 8],
                      "feature_sampling": None, "instance_sampling": 0.8, "label_sampling": 0.5, "max_conditions": 2,
                      "min_coverage": 3, "random_state": 4, "device": "numpy", "precision": "double",
                      "holdout": ["random", 0.25],
                      "global_pruning": {"method": "post-pruning", "use_holdout_set": True,
                                         "remove_unused_rules": True, "min_rules": 5, "interval": 2}}
    est = mdhom.load_model(model)
    assert all(len(r.conditions) <= 2 and r.labels.size == 1 for r in est.rules_.rules)


def test_rules_on_sparse_enron_arff(tmp_path, capsys):
    from shared_data import ENRON

    model = tmp_path / "e.json"
    assert main(["train", "--data", str(ENRON), "--labels", os.path.join(DATA, "enron.xml"), "--max-rules", "6",
                 "--head-type", "single", "--model", str(model)]) == 0
    assert "1001 features, 53 labels" in capsys.readouterr().out
    assert mdhom.load_model(model).n_outputs_ == 53


def test_rule_errors_are_reported(table, tmp_path, capsys):
    tmp, _, _ = table
    train, test, xml = _emotions()
    cases = [
        (["--data", train, "--labels", xml, "--max-rules", "5", "--n-estimators", "5"], "options of both learners"),
        (["--data", train, "--labels", xml, "--learner", "trees", "--max-rules", "5"], "does not take the rule options"),
        (["--data", train, "--labels", xml, "--learner", "rules", "--max-depth", "3"], "does not take the tree options"),
        (["--data", train, "--labels", xml, "--feature-binning", "equal-depth:8"], "feature_binning"),
        (["--data", train, "--labels", xml, "--max-rules", "0"], "max_rules"),
        (["--data", train, "--labels", xml, "--max-rules", "5", "--eval-data", test], "no separate evaluation set"),
    ]
    for flags, message in cases:
        assert main(["train", *flags, "--model", str(tmp / "m.json")]) == 2, flags
        assert message in capsys.readouterr().err, flags
    rng = np.random.default_rng(2)
    _csv(tmp / "reg.csv", rng.normal(size=(30, 3)), rng.normal(size=30))
    assert main(["train", "--data", str(tmp / "reg.csv"), "--target", "label", "--learner", "rules",
                 "--model", str(tmp / "m.json")]) == 2
    assert "only 0 and 1" in capsys.readouterr().err
    assert main(["train", "--data", train, "--labels", xml, "--max-rules", "4", "--model", str(tmp / "r.json")]) == 0
    capsys.readouterr()
    assert main(["predict", "--model", str(tmp / "r.json"), "--data", test]) == 2
    assert "pass --labels (the model predicts 6 labels)" in capsys.readouterr().err
    assert main(["predict", "--model", str(tmp / "r.json"), "--data", test, "--labels", "5"]) == 2
    assert "has 73 features, the model expects 72" in capsys.readouterr().err
