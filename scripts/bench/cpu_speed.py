#!/usr/bin/env python3
"""Single-stream speed, Sluice beside llama.cpp on the same GGUF file, in one run.

Alternates, ROUNDS times: Sluice's Benchmark<BENCH> (models package: pp128 =
a 128-token prompt in one pass, tg64 = 64 tokens decoded one at a time) and
llama-bench with the same shapes (-p 128 -n 64), each at 1 and 2 threads.
Taking turns keeps the ratio honest when a shared machine's speed drifts.
Prints a Markdown table of medians and Sluice/llama.cpp ratios, and with
--target whether each ratio meets it.

  scripts/bench/cpu_speed.py [ROUNDS]          default model, build.sh's llama.cpp
  scripts/bench/cpu_speed.py --model models/gemma-3-270m-q4_k_m.gguf
                                               (runs BenchmarkGemma3)
  scripts/bench/cpu_speed.py --llama-bench .build/llamacpp-newest/build/bin/llama-bench \\
        --target tg64=1.2 --target pp128=1.5   another peer, and the ratios wanted
  --reps N   llama-bench -r N and Sluice -benchtime Nx per round (default 3)

The environment's MODEL and BENCH are the defaults of --model and --bench.
With no --llama-bench, scripts/llamacpp/build.sh builds its llama.cpp first.
Exits 1 when a --target is missed.
"""
import argparse, json, os, re, statistics, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_LLAMA_BENCH = os.path.join(ROOT, ".build/llamacpp/build/bin/llama-bench")
ENV = dict(os.environ, CGO_ENABLED="1", CGO_LDFLAGS="-L" + os.path.join(ROOT, ".build/lib"),
           CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations -I" + os.path.join(ROOT, ".build/include"))
# The models tests open their files relative to models/; the benchmark binary
# is built once and run there, so rounds measure the model, not the compiler.
TEST_BIN = os.path.join(ROOT, ".build/bench/models.test")
# Benchmark<name> of the models package for each model file it knows.
BENCHES = {"SmolLM2-135M-Instruct.Q4_1.gguf": "SmolLM2", "gemma-3-270m-q4_k_m.gguf": "Gemma3"}


def sluice(bench, reps):
    out = subprocess.run([TEST_BIN, "-test.run", "^$", "-test.bench", "^Benchmark" + bench + "$",
                          "-test.benchtime", f"{reps}x"],
                         cwd=os.path.join(ROOT, "models"), env=ENV, check=True, capture_output=True, text=True).stdout
    res = {}
    for m in re.finditer(r"Benchmark" + bench + r"/(pp128|tg64)/threads=(\d)\S*\s.*?([\d.]+) tokens/s", out):
        res[(m.group(1), int(m.group(2)))] = float(m.group(3))
    if not res:
        sys.exit(f"Benchmark{bench} printed no tokens/s:\n{out}")
    return res


def llamacpp(llama_bench, model, reps):
    out = subprocess.run([llama_bench, "-m", model, "-t", "1,2", "-p", "128", "-n", "64", "-r", str(reps), "-o", "json"],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    res, build = {}, ""
    for r in json.loads(out):
        test = "pp128" if r["n_prompt"] else "tg64"
        res[(test, r["n_threads"])] = r["avg_ts"]
        build = f"{r.get('build_commit', '?')} (build {r.get('build_number', '?')}), {r.get('cpu_info', '')}"
    return res, build


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rounds", nargs="?", type=int, default=3)
    ap.add_argument("--model", default=os.environ.get("MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--bench", default=os.environ.get("BENCH"), help="models' Benchmark<BENCH>; must be the model's")
    ap.add_argument("--llama-bench", default=None, help="llama-bench binary (default: build.sh's)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--target", action="append", default=[], metavar="TEST=RATIO",
                    help="the Sluice/llama.cpp ratio wanted for pp128 or tg64 (every thread count)")
    a = ap.parse_args()
    model = os.path.join(ROOT, a.model)
    # Each Benchmark<BENCH> opens its own file, models/<name>: any other
    # pairing would time one file against another.
    bench = BENCHES.get(os.path.basename(model))
    if not bench or a.model != os.path.join("models", os.path.basename(model)):
        sys.exit(f"--model {a.model}: want one of " + ", ".join("models/" + f for f in BENCHES))
    if a.bench and a.bench != bench:
        sys.exit(f"Benchmark{a.bench} does not run {a.model} (Benchmark{bench} does)")
    targets = {}
    for t in a.target:
        test, _, ratio = t.partition("=")
        if test not in ("pp128", "tg64") or not ratio:
            sys.exit(f"--target {t}: want pp128=RATIO or tg64=RATIO")
        targets[test] = float(ratio)
    llama_bench = a.llama_bench or DEFAULT_LLAMA_BENCH
    if not a.llama_bench:
        subprocess.run([os.path.join(ROOT, "scripts/llamacpp/build.sh")], check=True)
    os.makedirs(os.path.dirname(TEST_BIN), exist_ok=True)
    subprocess.run(["go", "test", "-c", "-o", TEST_BIN, "./models/"], cwd=ROOT, env=ENV, check=True)
    s, l, build = {}, {}, ""
    for i in range(a.rounds):
        for k, v in sluice(bench, a.reps).items():
            s.setdefault(k, []).append(v)
        res, build = llamacpp(llama_bench, model, a.reps)
        for k, v in res.items():
            l.setdefault(k, []).append(v)
        print(f"round {i + 1}/{a.rounds} done, load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    cpu = re.search(r"Model name:\s*(.*)", lscpu).group(1)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {cpu}, {os.cpu_count()} cores, "
          f"load average at the end {os.getloadavg()[0]:.2f}; medians of {a.rounds} alternating rounds "
          f"({a.reps} repetitions each)\n{a.model}; Sluice Benchmark{bench}; llama-bench "
          f"{os.path.relpath(llama_bench, ROOT)}: {build}\n")
    print("| test | threads | Sluice tokens/s | llama.cpp tokens/s | Sluice / llama.cpp |" + (" target |" if targets else ""))
    print("|---|---:|---:|---:|---:|" + ("---|" if targets else ""))
    missed = False
    for key in sorted(s):
        x, y = statistics.median(s[key]), statistics.median(l.get(key, [float("nan")]))
        row = f"| {key[0]} | {key[1]} | {x:.1f} | {y:.1f} | {x / y:.2f} |"
        if targets:
            want = targets.get(key[0])
            if want is None:
                row += " |"
            else:
                ok = x / y >= want
                missed |= not ok
                row += f" ≥ {want:g}: {'met' if ok else 'missed'} |"
        print(row)
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
