#!/usr/bin/python3
"""kvscope-model-bench beside llama.cpp's llama-bench on the same GGUF files: pp and tg tokens/s and their
ratios (kvscope / llama.cpp, > 1: kvscope is faster).

The machines these run on are shared and noisy, so the two engines are run alternately, file by file, for
several rounds (the first engine of each round alternates too); the tables give each engine's mean over
the rounds, and its best round, with their ratios. Both get the same threads, prompt and generation lengths and
repetitions; kvscope's KV cache is F16, llama-bench's default (-ctk f16).

  side_by_side.py --kvscope-bench build/app/kvscope-model-bench --llama-bench PATH/llama-bench \\
      [--threads 2] [-p 512] [-n 128] [-r 3] [--rounds 2] FILE.gguf ...

Exit codes: 0 done; 1 a bench failed or printed no figures; 2 bad input (a missing file or program).
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROW = re.compile(r"^\|\s*(pp|tg)(\d+)\s*\|\s*([0-9.]+)\s*±\s*([0-9.]+)\s*t/s\s*\|")


def fail(message, code):
    print(f"side_by_side.py: error: {message}", file=sys.stderr)
    sys.exit(code)


def run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        fail(f"{' '.join(cmd)} exited with {proc.returncode}:\n{proc.stderr[-2000:]}", 1)
    return proc.stdout


def kvscope(args, path):
    """{'pp': t/s, 'tg': t/s} from kvscope-model-bench's table."""
    out = run([args.kvscope_bench, "--model", path, "--threads", str(args.threads), "-p", str(args.p), "-n",
               str(args.n), "-r", str(args.r), "-ctk", "f16"])
    rates = {m.group(1): float(m.group(3)) for m in map(ROW.match, out.splitlines()) if m}
    if set(rates) != {"pp", "tg"}:
        fail(f"kvscope-model-bench printed no pp/tg rows for {path}:\n{out}", 1)
    return rates


def llama(args, path):
    """{'pp': t/s, 'tg': t/s} from llama-bench's JSON."""
    out = run([args.llama_bench, "-m", path, "-t", str(args.threads), "-p", str(args.p), "-n", str(args.n),
               "-r", str(args.r), "-o", "json"])
    rates = {}
    for test in json.loads(out):
        if test["n_prompt"] > 0 and test["n_gen"] == 0:
            rates["pp"] = test["avg_ts"]
        elif test["n_gen"] > 0 and test["n_prompt"] == 0:
            rates["tg"] = test["avg_ts"]
    if set(rates) != {"pp", "tg"}:
        fail(f"llama-bench printed no pp/tg tests for {path}:\n{out}", 1)
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kvscope-bench", required=True, help="path of kvscope-model-bench")
    parser.add_argument("--llama-bench", required=True, help="path of llama.cpp's llama-bench")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of both engines (default 2)")
    parser.add_argument("-p", type=int, default=512, help="prompt tokens of the pp test (default 512)")
    parser.add_argument("-n", type=int, default=128, help="tokens of the tg test (default 128)")
    parser.add_argument("-r", type=int, default=3, help="repetitions inside each bench run (default 3)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds over all files (default 2)")
    parser.add_argument("files", nargs="+", metavar="FILE.gguf")
    args = parser.parse_args()
    for prog in (args.kvscope_bench, args.llama_bench):
        if not (os.path.isfile(prog) and os.access(prog, os.X_OK)):
            fail(f"{prog}: not an executable file", 2)
    for path in args.files:
        if not os.path.isfile(path):
            fail(f"{path}: no such file", 2)
    for name in ("threads", "p", "n", "r", "rounds"):
        if getattr(args, name) < 1:
            fail(f"--{name} must be at least 1, not {getattr(args, name)}", 2)

    engines = {"kvscope": kvscope, "llama.cpp": llama}
    results = {path: {e: [] for e in engines} for path in args.files}
    for rnd in range(args.rounds):
        order = list(engines) if rnd % 2 == 0 else list(reversed(engines))
        for path in args.files:
            for e in order:
                rates = engines[e](args, path)
                results[path][e].append(rates)
                print(f"round {rnd + 1} {os.path.basename(path)} {e}: pp{args.p} {rates['pp']:.2f} "
                      f"tg{args.n} {rates['tg']:.2f} t/s", file=sys.stderr, flush=True)

    def mean(runs):
        return sum(runs) / len(runs)

    # Means, and the best round of each engine: a run that shared the machine with other work is slow, never
    # fast, so the best round is the one nearest an idle machine.
    for what, reduce in (("means", mean), ("best rounds", max)):
        print(f"{args.threads} threads, {args.rounds} alternating rounds of -r {args.r}; t/s, {what}; "
              f"ratio = kvscope / llama.cpp")
        print(f"| {'file':<24} | {'llama pp' + str(args.p):>12} | {'kvscope':>9} | {'ratio':>6} "
              f"| {'llama tg' + str(args.n):>12} | {'kvscope':>9} | {'ratio':>6} |")
        print(f"|{'-' * 26}|{'-' * 14}|{'-' * 11}|{'-' * 8}|{'-' * 14}|{'-' * 11}|{'-' * 8}|")
        for path in args.files:
            row = [os.path.basename(path)]
            for test in ("pp", "tg"):
                l, k = (reduce([r[test] for r in results[path][e]]) for e in ("llama.cpp", "kvscope"))
                row += [f"{l:12.2f}", f"{k:9.2f}", f"{k / l:6.2f}"]
            print("| {:<24} | {} | {} | {} | {} | {} | {} |".format(*row))
        print()


if __name__ == "__main__":
    main()
