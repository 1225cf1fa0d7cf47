"""The revision comparison refuses a base that is not a commit, before it builds anything."""

from __future__ import annotations

import pytest

from benchmarks import revisions


def test_an_unknown_base_revision_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.setattr(revisions, "CACHE", tmp_path / "cache")
    with pytest.raises(SystemExit, match="--base 'no-such-rev' is not a commit"):
        revisions.checkout_of("no-such-rev")
    assert not (tmp_path / "cache").exists()


def test_an_unknown_workload_is_refused_with_the_choices(capsys):
    with pytest.raises(SystemExit):
        revisions.main(["nope", "--base", "HEAD"])
    assert "unknown workload(s) ['nope']" in capsys.readouterr().err
