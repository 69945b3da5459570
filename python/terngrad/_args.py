"""terngrad._args: a clear error for a stream-key or count argument outside its C++ type.

The bindings take seed as an unsigned 64-bit integer and worker, tensor and step as unsigned 32-bit
ones. nanobind refuses anything else with one generic TypeError ("incompatible function arguments",
the signature, the argument types) that does not say which argument is wrong or why. `explained`
wraps a binding: when that TypeError comes, it finds the argument that caused it and raises instead
ValueError "encode(): seed must be an integer in [0, 2^64), got -1", or TypeError "encode(): seed must
be an integer, got float" (for every argument the signature types as int, not only the table's). A bool
where the signature takes an int or a float (seed=True, which nanobind reads as 1) is refused before the call.
An unknown keyword argument is named too ("run(): unexpected keyword argument 'suport'"), and so is a list of
names given as one string (supports="none"). Anything else (and any case it cannot pin down) is raised as it was.
"""
import functools
import operator
import re

# argument name -> bits of its unsigned C++ type
_UNSIGNED_BITS = {
    "seed": 64, "worker": 32, "tensor": 32, "step": 32, "first_step": 32,
    "n": 64, "draws": 32, "float_below": 64, "steps": 32, "d": 64,
}


def whole(where, name, value, bits=None):
    """value as an int (NumPy integers too), in [0, 2^bits) when bits is given; otherwise TypeError or
    ValueError "<where>: <name> must be an integer [in [0, 2^bits)], got ..."."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":  # operator.index(True) is 1
        raise TypeError(f"{where}: {name} must be an integer, got bool {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{where}: {name} must be an integer, got {type(value).__name__} {value!r:.40}") from None
    if bits is not None and not 0 <= v < 2**bits:
        raise ValueError(f"{where}: {name} must be an integer in [0, 2^{bits}), got {v}")
    return v


def _diagnose(name, args, kwargs, message):
    # the signature nanobind prints: "1. encode(g: object, seed: int = 0, ...) -> object"
    sig = re.search(r"\d+\. \w+\((.*)\) ->", message)
    params = re.findall(r"(?:^|, )(\w+): (\w+)", sig.group(1)) if sig else []
    given = dict(zip((p for p, _ in params), args))
    given.update(kwargs)
    integers = {p for p, annotation in params if annotation == "int"} | set(_UNSIGNED_BITS)
    for arg, value in given.items():
        if arg in integers:
            try:  # an int argument not in the table: its form is checked, not its range
                whole(f"{name}()", arg, value, _UNSIGNED_BITS.get(arg))
            except (TypeError, ValueError) as e:
                return e
    names = [p for p, _ in params]
    if names:
        for arg in kwargs:
            if arg not in names:
                return TypeError(f"{name}(): unexpected keyword argument '{arg}' (its arguments: {', '.join(names)})")
    # a list of names given as one string (supports="none"): say so, rather than the signature
    sequences = set(re.findall(r"(?:^|, )(\w+): collections\.abc\.Sequence\[str\]", sig.group(1))) if sig else set()
    for arg, value in given.items():
        if arg in sequences and isinstance(value, str):
            return TypeError(f"{name}(): {arg} must be a list of names, e.g. {arg}={value.split(',')!r}, "
                             f"not the string {value!r}")
    return None


def _numeric_params(fn):
    """[(position, name, annotation)] of fn's int and float parameters, from the signature nanobind puts on
    the first line of its docstring."""
    doc = (getattr(fn, "__doc__", None) or "").split("\n", 1)[0]
    sig = re.match(r"\w+\((.*)\) ->", doc)
    if not sig:
        return []
    params = re.findall(r"(?:^|, )(\w+): ([\w.\[\] |]+?)(?= = |, \w+: |$)", sig.group(1))
    return [(i, p, a) for i, (p, a) in enumerate(params) if a.split(" | ")[0] in ("int", "float")]


def _refuse_bools(name, numeric, args, kwargs):
    # nanobind takes True as 1 and 1.0 (bool is a subclass of int): a flag passed where a number was meant
    for i, arg, annotation in numeric:
        value = args[i] if i < len(args) else kwargs.get(arg)
        if isinstance(value, bool) or type(value).__name__ == "bool_":
            kind = "an integer" if annotation.startswith("int") else "a number"
            raise TypeError(f"{name}(): {arg} must be {kind}, got bool {value!r}")


def explained(fn):
    """fn, raising a named error for an out-of-type integer argument (see the module's text)."""
    numeric = _numeric_params(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        _refuse_bools(getattr(fn, "__name__", "function"), numeric, args, kwargs)
        try:
            return fn(*args, **kwargs)
        except TypeError as e:
            if "incompatible function arguments" not in str(e):
                raise
            better = _diagnose(getattr(fn, "__name__", "function"), args, kwargs, str(e))
            if better is None:
                raise
            raise better from None
    return call
