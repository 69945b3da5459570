"""terngrad._cli: `python -m terngrad`, the command line of the installed package.

    python -m terngrad verify [--impl NAME] [--profile quick|ci|full] [--seed N] [--alpha A] [--beta B]
                              [--skip C,...] [--supports S,...] [--unseeded] [--exec-timeout SECONDS]
                              [--json FILE] [--junit FILE] [--no-progress]
    python -m terngrad verify --samples G.npy VALUES.npy [...] [--clip MODE] [--c C] [--scalar S]
    python -m terngrad verify --list-mutants
    python -m terngrad --version

`verify` mirrors the C++ program's `terngrad verify` (same options, defaults, report and exit status:
0 pass, 1 a check failed, 2 a usage or input error), running the battery through terngrad.verify. Not
here: --self-test, --example and --verbose (the self-test is the C++ program's), and the 'cuda'
implementation needs a CUDA build. An option given twice is refused, as there. Besides the C++ program's names, --impl takes
python:MODULE:FUNCTION, a draw function (terngrad.verify.run) imported from the current folder.
"""
import argparse
import importlib
import os
import stat
import sys

from ._version import __version__

PROG = "python -m terngrad"
DEFAULT_SEED = 20171204


class UsageError(Exception):
    """A bad option or input: one line on stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse's default prints the usage first)
        raise UsageError(message)


class _Once(argparse.Action):
    """An option of one value given twice is refused (argparse keeps the last silently), as the C++ program does."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, "_given", None) is None:
            namespace._given = set()
        if self.dest in namespace._given:
            raise UsageError(f"{option_string} given 2 times (give it once)")
        namespace._given.add(self.dest)
        setattr(namespace, self.dest, values)


def _list_of(known, what):
    def parse(text):
        items = [x.strip() for x in text.split(",")]
        if not text.strip():
            raise argparse.ArgumentTypeError("is given an empty value (a comma-separated list, no item empty)")
        if "" in items:
            raise argparse.ArgumentTypeError(f"has an empty item in '{text[:80]}' (a comma-separated list, no item empty)")
        for k, x in enumerate(items):
            if x not in known:
                raise argparse.ArgumentTypeError(f"unknown {what} '{x}' (known: {', '.join(known)})")
            if x in items[:k]:
                raise argparse.ArgumentTypeError(f"lists '{x}' twice (give each once)")
        return items
    return parse


def _number(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None


def _probability(text):
    v = _number(text)
    if not 1e-300 <= v <= 0.5:
        raise argparse.ArgumentTypeError(f"{text} is not in [1e-300, 0.5]")
    return v


def _seed(text):
    # decimal digits only, as the C++ program takes it: int(text, 0) also read '0x10', '1_000' and ' 12'
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"'{text[:40]}' is not an unsigned integer (decimal digits)")
    v = int(text)
    if not 0 <= v < 2**64:
        raise argparse.ArgumentTypeError(f"{text} is not in [0, 2^64)")
    return v


def _timeout(text):
    v = _number(text)
    if not 0.001 <= v <= 86400:
        raise argparse.ArgumentTypeError(f"{text} is not in [0.001, 86400]")
    return v


def _clip_factor(text):
    """--c: the codec takes [1e-3, 1e6] (kMinClipFactor, kMaxClipFactor), as `terngrad verify --c`."""
    v = _number(text)
    if not 0.001 <= v <= 1e6:
        raise argparse.ArgumentTypeError(f"{text} is not in [0.001, 1e+06]")
    return v


def _scalar(text):
    v = _number(text)
    if not 0.0 <= v <= 3.4e38:
        raise argparse.ArgumentTypeError(f"{text} is not in [0, 3.4e38]")
    return v


def build_parser(verify):
    p = _Parser(prog=PROG, description="terngrad-bench's TernGrad codec and its statistical battery, from the "
                                       "installed Python package")
    p.add_argument("--version", action="version", version=f"terngrad {__version__} (Python package)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    v = sub.add_parser(
        "verify", help="the statistical battery (as `terngrad verify`)",
        description="Statistical verification battery: structure, unbiasedness, variance, independence, streams, "
                    "clipping, layer-wise scalars, aggregation, cross-implementation bytes (exit 0 pass, 1 fail, "
                    "2 error)")
    v.add_argument("--impl", action=_Once, default=None, metavar="NAME",
                   help="Implementation: reference, optimized, cuda, exec:'CMD' (external program, one process per "
                        "request, docs/battery.md), serve:'CMD' (one process for the run), mutant:NAME or "
                        "variant:NAME (--list-mutants), python:MODULE:FUNCTION (a draw function) "
                        "(default: optimized)")
    v.add_argument("--profile", action=_Once, default=None, choices=list(verify.PROFILES),
                   help="quick (ctest), ci or full (default: ci)")
    v.add_argument("--seed", action=_Once, type=_seed, default=None,
                   help=f"Seed of the gradients and of the codec streams (default: {DEFAULT_SEED})")
    v.add_argument("--alpha", action=_Once, type=_probability, default=None,
                   help="Total false-fail probability of the run, in [1e-300, 0.5] (default: the profile's, 1e-6 "
                        "for quick and ci, 1e-9 for full; 1e-6 with --samples)")
    v.add_argument("--beta", action=_Once, type=_probability, default=None,
                   help="1 - power at which detectable effects are stated, in [1e-300, 0.5] (default: 1e-3)")
    v.add_argument("--json", action=_Once, metavar="FILE", help="Write the results as JSON to FILE ('-': on stdout, instead of "
                                                  "the table)")
    v.add_argument("--junit", action=_Once, metavar="FILE", help="Write the results as JUnit XML to FILE ('-': on stdout, instead "
                                                   "of the table)")
    v.add_argument("--skip", action=_Once, type=_list_of(verify.CHECKS, "check"), default=[], metavar="C,...",
                   help="Checks to leave out, comma-separated (e.g. cross for a codec with its own random stream): "
                        + ", ".join(verify.CHECKS) + " (default: none)")
    v.add_argument("--supports", action=_Once, type=_list_of(verify.CAPABILITIES, "capability"), default=[], metavar="S,...",
                   help="What the implementation implements, comma-separated: none, clip, saturate (clipping "
                        "modes), shared-scalar, spec-stream (default: all). The battery runs only what applies and "
                        "says what it left out")
    v.add_argument("--unseeded", action="store_true",
                   help="The implementation draws fresh randomness on every call (a framework's global generator), "
                        "so the same key does not give the same bytes: leave out only the same-key comparisons and "
                        "cross (terngrad.verify.run's reproducible=False)")
    v.add_argument("--exec-timeout", action=_Once, type=_timeout, default=None, metavar="SECONDS",
                   help="Seconds an external codec (exec:, serve:) may take per call, in [0.001, 86400] (default: 300)")
    v.add_argument("--no-progress", action="store_true", help="No progress line on stderr")
    v.add_argument("--list-mutants", action="store_true", help="List the mutants and the correct variants and exit")
    v.add_argument("--samples", nargs=2, action="append", metavar=("G.npy", "VALUES.npy"),
                   help="Check draws made elsewhere instead of running an implementation: G.npy (the gradient, "
                        "float32) and VALUES.npy (float32, shape (draws, G.size), row j = the decoded g~ of draw j); "
                        "repeat for the layers of one gradient. Runs structure, unbiased, variance and independence")
    v.add_argument("--clip", action=_Once, choices=["none", "clip", "saturate"], default=None,
                   help="With --samples: the clipping mode the draws used (default: none)")
    v.add_argument("--c", action=_Once, type=_clip_factor, default=None,
                   help="With --samples: the clipping factor c, bound c * sigma (default: 2.5)")
    v.add_argument("--scalar", action=_Once, type=_scalar, default=None,
                   help="With --samples: the shared scalar the draws were asked for, if any")
    return p


def _probe(folder):
    """None when entries can be made in the existing folder, else why not: a probe folder made and removed at once
    (os.access says yes to root on a read-only or special file system)."""
    for k in range(100):
        probe = os.path.join(folder, f".tg-probe-{os.getpid()}-{k}")
        try:
            os.mkdir(probe, 0o700)
        except FileExistsError:
            continue
        except OSError as e:
            return e.strerror or str(e)
        os.rmdir(probe)
        return None
    return "no free name for a probe"


def _check_writable(option, path):
    """As the C++ program: fail before a (possibly long) run when the report could not be written, naming what the
    path is. Creates nothing: a missing folder is made by the writer, right before the report goes into it."""
    if not path or path == "-":
        return
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError as e:
        raise UsageError(f"{option} {path}: {e.strerror or e}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"{option} {path} is a folder, not a file (give a file name)")
        if stat.S_ISBLK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
            what = "a block device" if stat.S_ISBLK(st.st_mode) else "a socket"
            raise UsageError(f"{option} {path} is {what} (outputs go to files, character devices or FIFOs)")
        if not stat.S_ISREG(st.st_mode) or path.startswith(("/proc/", "/dev/fd/", "/dev/std")):
            return  # written in place
        folder = os.path.dirname(os.path.realpath(path)) or "."
        why = _probe(folder)
        if why:
            raise UsageError(f"{option} {path}: cannot write into folder {folder}: {why}")
        return
    parent = os.path.dirname(path)
    folder = parent or "."
    while True:  # the nearest existing folder, where the writer would make the missing ones
        try:
            fst = os.stat(folder)
        except (FileNotFoundError, NotADirectoryError) as e:
            up = os.path.dirname(folder) or "."
            if up == folder:
                raise UsageError(f"{option} {path}: {folder}: {e.strerror or e}") from None
            folder = up
            continue
        except OSError as e:
            raise UsageError(f"{option} {path}: {folder}: {e.strerror or e}") from None
        if not stat.S_ISDIR(fst.st_mode):
            why = f"{folder} is not a folder"
        else:
            why = _probe(folder)
            why = why and f"cannot write into {folder}: {why}"
        break
    if why:
        raise UsageError(f"{option} {path}: " + (why if folder == (parent or ".") else f"cannot create folder {parent}: {why}"))


def _write(path, text):
    """The project's one output writer (tg::write_output): never replaces a device, FIFO or symlink."""
    from ._core import write_output
    write_output(path, text.encode("utf-8"))


def _python_impl(spec):
    """python:MODULE:FUNCTION -> the function, imported with the current folder on sys.path."""
    module, _, function = spec.partition(":")
    if not module or not function:
        raise UsageError(f"--impl python:{spec}: expected python:MODULE:FUNCTION")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        fn = getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as e:
        raise UsageError(f"--impl python:{spec}: {e}") from None
    if not callable(fn):
        raise UsageError(f"--impl python:{spec}: not a function")
    return fn


def _load_npy(path, np):
    """A .npy file of --samples, or one line saying why it is not one (no traceback, no pickle)."""
    if not os.path.isfile(path):
        raise UsageError(f"--samples: {path}: " + ("not a regular file (a FIFO, device or folder is refused)"
                                                   if os.path.exists(path) else "file not found"))
    try:
        with open(path, "rb") as f:
            magic = f.read(6)
        if magic != b"\x93NUMPY":
            raise UsageError(f"--samples: {path} is not a .npy file ("
                             + ("it is empty" if not magic else "it does not start with the .npy magic \\x93NUMPY")
                             + "; write it with np.save)")
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise UsageError(f"--samples: {path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    if a.ndim > 1 and not a.flags.c_contiguous and sum(n > 1 for n in a.shape) > 1:  # as `terngrad verify` reads it
        raise UsageError(f"--samples: {path}: a Fortran-order array (fortran_order True) of shape {a.shape}: save it in "
                         "C order (np.save(path, np.ascontiguousarray(a)))")
    return a


def _check_outputs(a):
    for option, path in (("--json", a.json), ("--junit", a.junit)):
        if path is not None and path == "":
            raise UsageError(f"{option}: is empty: give a file name (an unset variable?)")
    if a.json == "-" and a.junit == "-":
        raise UsageError("--json - and --junit - cannot both go to stdout")
    if a.json and a.junit and a.json != "-" and a.junit != "-" and _same_file(a.json, a.junit):
        raise UsageError(f"--json and --junit name the same file, {a.json}: one would replace the other "
                         "(give two file names)")
    _check_writable("--json", a.json)
    _check_writable("--junit", a.junit)


def _samples(a, verify):
    import numpy as np

    for option in ("impl", "profile", "seed", "exec_timeout"):
        if getattr(a, option) is not None:
            raise UsageError(f"--samples excludes --{option.replace('_', '-')}")
    if a.unseeded:
        raise UsageError("--samples excludes --unseeded")
    for s in a.skip:
        if s != "independence":
            raise UsageError(f"--samples: only the independence check can be skipped, not '{s}'")
    _check_outputs(a)
    for gp, vp in a.samples:  # an output must not replace an input
        for option, out in (("--json", a.json), ("--junit", a.junit)):
            for inp in (gp, vp):
                if out and out != "-" and _same_file(out, inp):
                    raise UsageError(f"{option} {out} is the input file given to --samples: the output would replace "
                                     "it (give the output another name)")
    for i, (_, vp) in enumerate(a.samples):  # each pair is one layer, with its own draws
        for k, (_, earlier) in enumerate(a.samples[:i]):
            if _same_file(vp, earlier):
                raise UsageError(f"--samples: the draws file {vp} is given for layer {k} and for layer {i} (each "
                                 "--samples G V pair is one layer, with its own draws)")
    grads, values = [], []
    for gp, vp in a.samples:
        grads.append(_load_npy(gp, np))
        values.append(_load_npy(vp, np))
    kw = {} if a.alpha is None else {"alpha": a.alpha}
    if a.beta is not None:
        kw["beta"] = a.beta
    return verify.check_values(grads, values, clip=a.clip or "none", c=2.5 if a.c is None else a.c,
                               scalar=a.scalar, independence="independence" not in a.skip, **kw)


def _verify(a, verify):
    for option in ("clip", "c", "scalar"):
        if getattr(a, option) is not None and not a.samples:
            raise UsageError(f"--{option} needs --samples")
    if a.list_mutants:
        given = [o for o, v in (("--impl", a.impl), ("--profile", a.profile), ("--seed", a.seed), ("--alpha", a.alpha),
                                ("--beta", a.beta), ("--json", a.json), ("--junit", a.junit), ("--skip", a.skip),
                                ("--supports", a.supports), ("--unseeded", a.unseeded),
                                ("--exec-timeout", a.exec_timeout), ("--samples", a.samples)) if v]
        if given:
            raise UsageError(f"{given[0]} excludes --list-mutants (it lists the mutants and runs nothing)")
        for name, text in verify.MUTANTS.items():
            print(f"mutant:{name:<18} {text}")
        for name, text in verify.VARIANTS.items():
            print(f"variant:{name:<17} (correct) {text}")
        return 0
    if a.samples:
        result = _samples(a, verify)
    else:
        impl = "optimized" if a.impl is None else a.impl
        if a.exec_timeout is not None and not impl.startswith(("exec:", "serve:")):
            raise UsageError("--exec-timeout is used only with an external implementation (--impl exec:CMD or "
                             "serve:CMD); this run would ignore it")
        target = _python_impl(impl[len("python:"):]) if impl.startswith("python:") else impl
        _check_outputs(a)
        try:
            result = verify.run(target, profile=a.profile or "ci", seed=DEFAULT_SEED if a.seed is None else a.seed,
                                skip=a.skip, supports=a.supports, alpha=a.alpha, beta=a.beta,
                                progress=not a.no_progress, name=impl if target is not impl else None,
                                reproducible=not a.unseeded,
                                exec_timeout=300.0 if a.exec_timeout is None else a.exec_timeout)
        except ValueError as e:  # the library's list of names: this command also takes a draw function
            if not str(e).startswith("unknown --impl") or not str(e).endswith(")"):
                raise
            raise UsageError(str(e)[:-1] + "; here also python:MODULE:FUNCTION, a draw function)") from None
    if "-" not in (a.json, a.junit):  # a report on stdout goes there instead of the table
        sys.stdout.write(result.table())
    for path, text in ((a.json, result.to_json), (a.junit, result.to_junit)):
        if path == "-":
            sys.stdout.write(text())
        elif path:
            sys.stdout.flush()
            _write(path, text())
    sys.stdout.flush()
    return 0 if result.passed else 1


def _signal_of(text):
    """The signal number in "... signal 15 ..." (terngrad.verify.Interrupted's message), else None."""
    import re
    m = re.search(r"signal (\d+)", text)
    return int(m.group(1)) if m else None


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _reads_as_report(option, path):
    """Whether the file reads as what `option` writes (a JSON object, JUnit XML): only such a file is removed as a
    report of an earlier run; a file of another kind there (notes, data) stays, as `terngrad verify` leaves it."""
    import json
    try:
        with open(path, "rb") as f:
            if option == "--json":
                if os.path.getsize(path) > 1 << 30:
                    return False
                return isinstance(json.loads(f.read().decode("utf-8")), dict)
            head = f.read(4096)
    except (OSError, ValueError):
        return False
    return b"\0" not in head and head.startswith(b"<?xml") and b"<testsuites" in head


def _retire_reports(a):
    """A run that ends in an error or is interrupted leaves no report of an earlier run at its --json/--junit
    paths (a pipeline reading them would take the old result for this run's), as `terngrad verify` does:
    regular files only (a symbolic link's target, which the writer would have replaced) that read as reports.
    Returns the paths removed, which the error line names."""
    removed = []
    for option, path in (("--json", getattr(a, "json", None)), ("--junit", getattr(a, "junit", None))):
        if not path or path == "-" or path.startswith(("/proc/", "/dev/")):
            continue
        target = os.path.realpath(path)
        if not os.path.isfile(target) or not _reads_as_report(option, target):
            continue
        try:
            os.remove(target)
        except OSError:
            continue
        removed.append(path)
    return removed


class _Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP during a run: handled as Ctrl-C is (the run stops at its next block of draws, earlier
    reports are removed), with the signal's exit status 128 + signum."""

    def __init__(self, signum):
        super().__init__(f"signal {signum}")
        self.signum = signum


def _terminate(signum, frame):
    raise _Terminated(signum)


def _catch_termination():
    """Installs _terminate for SIGTERM and SIGHUP, except where the process started with the signal ignored
    (nohup, a script's background job): returns the handlers to restore."""
    import signal
    saved = {}
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is None:
            continue
        old = signal.getsignal(sig)
        if old is signal.SIG_IGN:
            continue
        saved[sig] = old
        signal.signal(sig, _terminate)
    return saved


def main(argv=None):
    import signal
    from . import verify

    argv = sys.argv[1:] if argv is None else list(argv)
    command = f"{PROG} verify" if argv[:1] == ["verify"] else PROG
    parser = build_parser(verify)
    saved = _catch_termination() if _on_main_thread() else {}
    try:
        return _main(argv, command, parser, verify)
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)


def _on_main_thread():
    import threading
    return threading.current_thread() is threading.main_thread()


def _main(argv, command, parser, verify):
    a = None
    try:
        a = parser.parse_args(argv)
        if a.command is None:
            parser.print_help()
            return 2
        return _verify(a, verify)
    except UsageError as e:
        line, rc = f"{command}: error: {e}", 2
    except verify.Unavailable as e:
        line, rc = f"{command}: error: {e}", 2
    except (ValueError, TypeError, OSError) as e:  # input errors (terngrad.CodecError is a ValueError), unwritable outputs
        line, rc = f"{command}: error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", 2
    except KeyboardInterrupt as e:  # Ctrl-C, _Terminated, terngrad.verify.Interrupted (a signal during an exec: run)
        signum = getattr(e, "signum", None) or _signal_of(str(e))
        line, rc = f"{command}: interrupted{': ' + str(e) if str(e) else ''}; no report written", 128 + (signum or 2)
    removed = _retire_reports(a) if a is not None else []
    if removed:  # said on the same line: one line on stderr
        line += "; removed %s, %s of an earlier run (this run wrote none)" % (
            " and ".join(removed), "reports" if len(removed) > 1 else "a report")
    if len(line) > 600:  # a path echoed whole would fill the screen: its start and its end, as the C++ program
        line = line[:200] + " ... " + line[-395:]
    print(line, file=sys.stderr)
    return rc
