"""terngrad-bench: `terngrad verify --json/--junit` outputs checked against docs/verify-output.schema.json
and for stable JUnit names. Run by ctest (verify_output_schema):
    build/venv/bin/python verify/tests/output_schema.py build/default/apps/terngrad
"""
import json
import pathlib
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

import jsonschema

ROOT = pathlib.Path(__file__).resolve().parents[2]
failures = []


def expect(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def run(terngrad, *args):
    p = subprocess.run([terngrad, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def junit_cases(path):
    root = ET.parse(path).getroot()
    return [(c.get("classname"), c.get("name"), c.find("failure") is not None, c.find("skipped") is not None)
            for c in root.iter("testcase")], root


def main(terngrad):
    schema = json.loads((ROOT / "docs" / "verify-output.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        names = {}
        for seed in (1, 2):
            rc, out = run(terngrad, "verify", "--profile", "quick", "--no-progress", "--seed", str(seed),
                          "--skip", "cross", "--json", str(tmp / f"r{seed}.json"), "--junit", str(tmp / f"r{seed}.xml"))
            expect(rc == 0, f"quick run, seed {seed}: exit {rc}\n{out[-2000:]}")
            doc = json.loads((tmp / f"r{seed}.json").read_text())
            errors = sorted(validator.iter_errors(doc), key=str)
            expect(not errors, f"seed {seed}: JSON does not match the schema: {[e.message for e in errors[:3]]}")
            expect(doc["runs"][0]["rows"][-1]["kind"] == "skipped", "the skipped check leaves a row")
            cases, root = junit_cases(tmp / f"r{seed}.xml")
            names[seed] = [(c, n) for c, n, _, _ in cases]
            expect(len(set(names[seed])) == len(names[seed]), "JUnit test names are unique")
            expect(any(s for *_, s in cases), "the skipped check is a <skipped/> case")
            expect(root.get("failures") == "0", f"seed {seed}: JUnit failures {root.get('failures')}")
        expect(names[1] == names[2], "JUnit test names are the same for two seeds")
        # The self-test: mutants rejected as expected are passing cases; the JSON says pass.
        rc, out = run(terngrad, "verify", "--self-test", "--profile", "quick", "--no-progress", "--example", "none",
                      "--json", str(tmp / "st.json"), "--junit", str(tmp / "st.xml"))
        expect(rc == 0 and "verdict: PASS" in out, f"self-test: exit {rc}")
        doc = json.loads((tmp / "st.json").read_text())
        errors = sorted(validator.iter_errors(doc), key=str)
        expect(not errors, f"self-test JSON does not match the schema: {[e.message for e in errors[:3]]}")
        expect(doc["pass"] is True, "self-test JSON pass is true when the verdict is PASS")
        expect(any(r["expected"] == "reject" and r["as_expected"] for r in doc["runs"]), "mutant runs are expected rejects")
        cases, root = junit_cases(tmp / "st.xml")
        expect(root.get("failures") == "0", f"self-test JUnit failures {root.get('failures')} with verdict PASS")
        expect(any(c == "self-test" and n.startswith("mutant:") for c, n, _, _ in cases), "one case per mutant")
        # Nothing to check is a usage error.
        rc, out = run(terngrad, "verify", "--profile", "quick", "--skip",
                      "structure,unbiased,variance,independence,streams,collision,clipping,layerwise,aggregate,cross")
        expect(rc == 2 and "nothing would be verified" in out, f"every check skipped: exit {rc}, {out.strip()}")
    print("output_schema:", "PASS" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
