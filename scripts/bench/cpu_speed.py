#!/usr/bin/env python3
"""Single-stream speed on the default model, Sluice beside llama.cpp, in one run.

Alternates, ROUNDS times: Sluice's BenchmarkSmolLM2 (models package: pp128 =
a 128-token prompt in one pass, tg64 = 64 tokens decoded one at a time) and
llama-bench with the same shapes (-p 128 -n 64), each at 1 and 2 threads.
Taking turns keeps the ratio honest when a shared machine's speed drifts.
Prints a Markdown table of medians and Sluice/llama.cpp ratios.

  scripts/bench/cpu_speed.py [ROUNDS]     (default 3; builds llama.cpp first)
  BENCH=Gemma3 MODEL=models/gemma-3-270m-q4_k_m.gguf scripts/bench/cpu_speed.py
                                          the same for another model benchmark
"""
import json, os, re, statistics, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, os.environ.get("MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
BENCH = os.environ.get("BENCH", "SmolLM2")  # models' Benchmark<BENCH>
LLAMA_BENCH = os.path.join(ROOT, ".build/llamacpp/build/bin/llama-bench")
ENV = dict(os.environ, CGO_LDFLAGS="-L" + os.path.join(ROOT, ".build/lib"),
           CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations")


def sluice():
    out = subprocess.run(["go", "test", "-run", "^$", "-bench", "^Benchmark" + BENCH + "$", "-benchtime", "3x", "./models/"],
                         cwd=ROOT, env=ENV, check=True, capture_output=True, text=True).stdout
    res = {}
    for m in re.finditer(r"Benchmark" + BENCH + r"/(pp128|tg64)/threads=(\d)\S*\s.*?([\d.]+) tokens/s", out):
        res[(m.group(1), int(m.group(2)))] = float(m.group(3))
    return res


def llamacpp():
    out = subprocess.run([LLAMA_BENCH, "-m", MODEL, "-t", "1,2", "-p", "128", "-n", "64", "-r", "3", "-o", "json"],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    res = {}
    for r in json.loads(out):
        test = "pp128" if r["n_prompt"] else "tg64"
        res[(test, r["n_threads"])] = r["avg_ts"]
    return res


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    subprocess.run([os.path.join(ROOT, "scripts/llamacpp/build.sh")], check=True)
    s, l = {}, {}
    for i in range(rounds):
        for k, v in sluice().items():
            s.setdefault(k, []).append(v)
        for k, v in llamacpp().items():
            l.setdefault(k, []).append(v)
        print(f"round {i + 1}/{rounds} done, load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    cpu = re.search(r"Model name:\s*(.*)", lscpu).group(1)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {cpu}, {os.cpu_count()} cores, "
          f"load average at the end {os.getloadavg()[0]:.2f}; medians of {rounds} alternating rounds\n")
    print("| test | threads | Sluice tokens/s | llama.cpp tokens/s | Sluice / llama.cpp |")
    print("|---|---:|---:|---:|---:|")
    for key in sorted(s):
        a, b = statistics.median(s[key]), statistics.median(l.get(key, [float("nan")]))
        print(f"| {key[0]} | {key[1]} | {a:.1f} | {b:.1f} | {a / b:.2f} |")


if __name__ == "__main__":
    main()
