"""No secret reaches the disk: a run with sentinel secrets in an environment variable, an HTTP
header, URLs (query token and user:password) and the W&B section, with W&B offline and an API
comparator served on localhost, then a scan of every file the run wrote."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

from comlrl.core.cli import main

SENTINELS = {
    "env": "sentinel-env-7f3a91",
    "header": "sentinel-header-52c0de",
    "query": "sentinel-query-a1b2c3",
    "userinfo": "sentinel-userinfo-d4e5f6",
    "wandb": "sentinel-wandb-0a9b8c",
}


class _Comparator(BaseHTTPRequestHandler):
    """A generic-format comparator endpoint: n short completions per request."""

    seen_headers: list[dict[str, str]] = []

    def do_POST(self):  # noqa: N802 (the http.server API)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen_headers.append(dict(self.headers))
        n = int(body.get("num_return_sequences", 1))
        payload = json.dumps({"completions": ["a short tale." * (i + 1) for i in range(n)]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(payload.encode())

    def log_message(self, *args):  # keep the test output clean
        return


def _scan(root) -> list[str]:
    hits = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as fh:
                data = fh.read()
            hits += [f"{path}: {k}" for k, v in SENTINELS.items() if v.encode() in data]
    return hits


def test_no_sentinel_secret_is_written_anywhere(tmp_path, monkeypatch, capsys):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Comparator)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("COMLRL_TEST_COMPARATOR_KEY", SENTINELS["env"])
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(work))
    run_file = tmp_path / "secret_run.yaml"  # the user's own file holds the secrets; not scanned
    run_file.write_text(
        yaml.safe_dump(
            {
                "algorithm": "madpo_iter",
                "task": {"name": "length_ratio"},
                "agent_model": {"name": "tiny"},
                "dataset": {"train_limit": 2, "eval_limit": 1},
                "seed": 0,
                "output": {"run_name": "secret", "save_final_model": False, "verbose": False},
                "wandb": {
                    "mode": "offline",
                    "project": "secrets",
                    "dir": str(work / "wandb"),
                    # The run file schema refuses wandb.api_key itself (W&B reads its key from
                    # the environment); a key in the sections logged as W&B config is redacted.
                    "config_sections": {"service": {"api_key": SENTINELS["wandb"]}},
                },
                "madpo_iter": {
                    "report_to": ["wandb"],
                    "num_iterations": 1,
                    "num_train_epochs": 1,
                    "preference_num_candidates": 2,
                    "comparator_num_candidates": 2,
                    "preference_pairs_per_sample": 1,
                    "max_new_tokens": 6,
                    "train_batch_size": 2,
                    "eval_interval": 0,
                    "comparator_policy": "api",
                    "comparator_api_format": "generic",
                    "comparator_api_url": (
                        f"http://127.0.0.1:{port}/compare?api_token={SENTINELS['query']}&v=1"
                    ),
                    "comparator_api_headers": {"X-Api-Key": SENTINELS["header"]},
                    "comparator_api_key_env": "COMLRL_TEST_COMPARATOR_KEY",
                    "comparator_api_extra_body": {
                        "callback": f"https://bot:{SENTINELS['userinfo']}@hooks.invalid/done"
                    },
                },
            }
        )
    )
    try:
        assert main(["train", "--config", str(run_file)]) == 0
    finally:
        server.shutdown()
        import wandb

        wandb.teardown()  # W&B's process-wide state must not carry this test's dirs onward
    # The secrets were really in use: the endpoint got the key from the environment and the
    # header from the run file.
    seen = _Comparator.seen_headers
    assert seen and seen[0]["Authorization"] == f"Bearer {SENTINELS['env']}"
    assert seen[0]["X-Api-Key"] == SENTINELS["header"]
    run = work / "runs" / "secret"
    assert (run / "config.yaml").exists() and os.listdir(run / "checkpoints")
    assert [p for p in (work / "wandb").rglob("offline-run-*") if p.is_dir()]
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["madpo_iter"]["comparator_api_key_env"] == "COMLRL_TEST_COMPARATOR_KEY"
    assert "v=1" in saved["madpo_iter"]["comparator_api_url"]  # only the secret part is gone
    wandb_files = [p.read_bytes() for p in (work / "wandb").rglob("*") if p.is_file()]
    assert any(b"service" in blob and b"<redacted>" in blob for blob in wandb_files)
    assert _scan(work) == []
    out = capsys.readouterr()
    assert not [k for k, v in SENTINELS.items() if v in out.out + out.err]
