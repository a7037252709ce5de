"""What the Python test scripts share: a check that records its failure and goes on."""

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return bool(cond)
