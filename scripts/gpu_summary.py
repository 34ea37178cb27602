"""scripts/gpu_check.sh's summary: machine, tests passed/skipped/failed per suite
(from the JUnit files pytest and ctest wrote), the attention pick and every
candidate's time, as summary.json and summary.md in the results folder.

Usage: gpu_summary.py OUT [FAILED_STEP ...]
"""

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

# Each suite's JUnit files: ctest writes two (gpu_check.sh runs the out-of-memory case alone).
JUNIT_FILES = {"pytest": ("pytest.xml",), "ctest": ("ctest.xml", "ctest-oom.xml")}


def junit_counts(paths: list[Path]) -> dict:
    """Passed, skipped and failed test cases over `paths` (those present), with the names of the
    failed and skipped ones."""
    paths = [p for p in paths if p.exists()]
    if not paths:
        return {"missing": True}
    counts = {"passed": 0, "skipped": 0, "failed": 0}
    skipped, failed = [], []
    cases = [case for path in paths for case in ET.parse(path).getroot().iter("testcase")]
    for case in cases:
        name = f"{case.get('classname', '')}::{case.get('name', '')}".strip(":")
        if case.find("skipped") is not None:
            counts["skipped"] += 1
            skipped.append(f"{name}: {case.find('skipped').get('message', '')}")
        elif case.find("failure") is not None or case.find("error") is not None:
            counts["failed"] += 1
            failed.append(name)
        else:
            counts["passed"] += 1
    return {**counts, "failed_tests": failed, "skipped_tests": skipped}


def attention_pick(manifest_path: Path) -> dict | None:
    if not manifest_path.exists():
        return None
    m = json.loads(manifest_path.read_text())
    training = m.get("training", {})
    return {
        "target": m["target"],
        "dtype": m["dtype"],
        "prefill": {k: v for k, v in m["attention"].items() if k != "decode"},
        "decode": m["attention"]["decode"],
        "training": {**training.get("attention_choice", {}), "trains_with": training.get("attention")},
        "linears": {g: m["graphs"][g]["linear"] for g in ("decode", "decode_one")},
    }


def candidate_table(choice: dict, what: str, timing: str, reference: str) -> list[str]:
    lines = ["", f"| {what} | runs | {timing} | max abs err vs {reference} |", "| --- | --- | --- | --- |"]
    for name, c in choice.get("candidates", {}).items():
        lines.append(f"| {name} | {c['runs']} | {c.get('ms', '—')} | {c.get('max_abs_err', '—')} |")
    return lines


def markdown(s: dict) -> str:
    lines = ["# GPU check", "", "```", s["machine"].strip(), "```", ""]
    lines += ["| suite | passed | skipped | failed |", "| --- | --- | --- | --- |"]
    for suite in ("pytest", "ctest"):
        c = s["tests"][suite]
        lines.append(f"| {suite} | " + " | ".join(str(c.get(k, "—")) for k in ("passed", "skipped", "failed")) + " |")
    failing = [t for suite in s["tests"].values() for t in suite.get("failed_tests", [])]
    lines += ["", f"Failed steps: {', '.join(s['failed_steps']) or 'none'}."]
    lines += [f"- failed: {t}" for t in failing]
    pick = s["attention"]
    if pick:
        where = f"GPT-2 124M, {pick['dtype']}, {pick['target']['arch']}"
        for use, measured in (("prefill", "prefill"), ("decode", "4 decode steps"), ("training", "forward + backward")):
            choice = pick[use]
            lines += ["", f"## Attention pick for {use} ({where}): **{choice.get('backend')}**"]
            if choice.get("trains_with") not in (None, choice.get("backend")):
                lines.append(f"(compiled backward refused; trains with {choice['trains_with']})")
            lines += candidate_table(choice, "kernel", f"{measured} ms", "math")
        for graph, what in (("decode_one", "Single-sequence decode"), ("decode", "Prefill and batched decode")):
            linear = pick["linears"][graph]
            lines += ["", f"## {what} linears ({where}): **{linear['form']}** ({linear['selected_by']})"]
            lines += candidate_table(linear, "form", "4 decode steps ms", "mm")
    return "\n".join(lines) + "\n"


def main(out: Path, failed_steps: list[str]) -> None:
    summary = {
        "machine": (out / "machine.txt").read_text() if (out / "machine.txt").exists() else "",
        "failed_steps": failed_steps,
        "tests": {suite: junit_counts([out / f for f in files]) for suite, files in JUNIT_FILES.items()},
        "attention": attention_pick(out / "gpt2-manifest.json"),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    text = markdown(summary)
    (out / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
