#!/usr/bin/env bash
# Speculative decoding against llama.cpp's own, in the same run (issue 26):
# one stream at a time of BenchmarkSpeculative's two workloads (the edit
# prompt, whose answer repeats it, and free text; read from
# engine/spec_bench_test.go, so both measure the same text), greedy, 96
# tokens with the end-of-generation token ignored (as the benchmark's engine
# has none), against
#
#   sluice          sluice serve
#   sluice-ngram    sluice serve --speculate ngram
#   llama           llama-server (v0.5.0, .build/llamacpp-newest)
#   llama-<type>    llama-server --spec-type <type>, for each of SPEC_TYPES
#                   (default ngram-simple ngram-mod ngram-map-k, llama.cpp's
#                   own settings for each; SPEC_TYPES= for none)
#   sluice-draft    sluice serve --draft-model DRAFT
#   llama-draft     llama-server --model-draft DRAFT --spec-type draft-simple
#                   (v0.5.0 loads a --model-draft alone but drafts nothing
#                   with it: no draft_n in its timings)
#   base            BASELINE serve, another build of Sluice (a change's
#   base-ngram      parent), plain and --speculate ngram, when BASELINE is
#                   set: a change to speculation measured against its
#                   parent in the same rounds, not against last session's
#                   table
#
# WORKLOADS (default: edit edit-chat json-chat free) picks them: edit and
# free are raw completions of benchEditText and benchFreeText; edit-chat and
# json-chat send benchEditText's and benchJSONText's request alone (the
# task and the code or document, without the primed "Here is..." answer)
# as one user message to /v1/chat/completions, as an agent or a chat client
# sends it. The chat forms are there because SmolLM2-135M's greedy answer
# to the primed edit prompt is not an edit: it leaves the function at its
# fourth line and loops on a comment of its own, so whatever speculation
# gains there it gains on the model's own repetition (its edit-chat answer
# loops too, on an expression of its own); asked by chat to reformat the
# JSON it does reformat it, repeating the document's values between new
# line breaks, and Gemma 3 270M answers both chat requests by repeating
# them word for word. Each
# server gets CHAT_TEMPLATE as --chat-template when it is set (Gemma 3
# 270M's file carries none: CHAT_TEMPLATE=gemma).
#
# DRAFT (default: MODEL itself; DRAFT= leaves both draft servers out) is one
# file for both, a model of MODEL's tokenizer: no smaller model sharing
# SmolLM2's is on this machine, so by default SmolLM2 drafts for itself,
# which accepts every draft and shows what drafting costs each server, not
# what a real draft gains. llama-server drafts with its defaults (up to 3
# tokens a step, --spec-draft-n-max); Sluice self-tunes up to K 8.
#
# all at THREADS threads, OMP_WAIT_POLICY=PASSIVE unless set. Each round
# takes the workloads in turn and each workload's requests in turn, every
# server serving each request one after another (the order rotating), each
# on a server started afresh and warmed with prompts of its own:
# llama.cpp's ngram-mod keeps its n-gram table across requests, and a
# second request of the same prompt drafts the first one's answer whole
# (71 of 71 accepted, where the first drafted 7), which no client repeating
# nothing would see. The texts differ between the servers: the prompts are
# the same tokens, but near-tied greedy choices fall differently (the free
# prompt's first token: Sluice " a" -1.259 over " there" -1.329, llama.cpp
# " there" -1.247 over " a" -1.281), so each speculates on its own greedy
# answer; the first 60 characters of each answer are in the raw file.
# Decode tok/s is measured the same way for all, by the client: the
# completion's tokens after the first over the time from the first streamed
# token to the last. Acceptance is each server's own: Sluice's
# sluice_spec_decode_* counters (/metrics, before and after the request),
# llama-server's timings.draft_n and draft_n_accepted. On a machine other
# jobs load, the load average is recorded with every round; compare ratios
# within a round, whose servers ran minutes apart.
#
#   scripts/bench/spec.sh [ROUNDS]   (default 5)
#
# COOLDOWN=SECONDS rests the machine before each server starts (lib.sh).
#
# REQUESTS (default 1) is how many requests each server makes of each
# workload in a round, each on a server started afresh (a server that saw
# the prompt once drafts from it: see above); a round's figure for a
# server is the median of its requests. One request a round left a single
# hiccup in charge of a round's ratio on session 6's and 7's Ice Lake,
# where the plain server's speed on one prompt moved 93–127 tok/s between
# rounds (and 29 once).
#
# Prints a table (medians over all requests, and each server's ratio to
# plain Sluice and sluice-ngram's and sluice-draft's to it, medians of the
# per-round ratios of per-round medians); the raw figures go to
# $LOGS/spec.tsv.
set -euo pipefail
# PASSIVE keeps llama.cpp's OpenMP threads from spinning at barriers, which
# a loaded machine needs (lib.sh); on a quiet one it costs llama-server
# most of its speed (SmolLM2 edit, load 1.3: 20.9 tok/s), so a quiet run
# should set OMP_WAIT_POLICY=ACTIVE, llama.cpp's own default.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
SLOTS=${SLOTS:-1}
CTX_TOKENS=${CTX_TOKENS:-2048}
LLAMA_SERVER=${LLAMA_SERVER:-.build/llamacpp-newest/build/bin/llama-server}
source "$(dirname "$0")/lib.sh"
# lib.sh's trap stops the servers; a signal must also end the rounds.
trap 'cleanup; exit 130' INT TERM
ROUNDS=${1:-5}
PORT=${PORT:-18191}
SPEC_TYPES=${SPEC_TYPES-ngram-simple ngram-mod ngram-map-k}
DRAFT=${DRAFT-$MODEL}
MAX_TOKENS=${MAX_TOKENS:-96}
REQUESTS=${REQUESTS:-1}
read -ra WORKLOADS <<<"${WORKLOADS:-edit edit-chat json-chat free}"
CHAT_TEMPLATE=${CHAT_TEMPLATE:-}
RAW=$LOGS/spec.tsv
[[ -x $LLAMA_SERVER ]] || {
	echo "$LLAMA_SERVER is missing: scripts/llamacpp/build-newest.sh builds it" >&2
	exit 2
}
header
echo "llama-server: $LLAMA_SERVER ($("$LLAMA_SERVER" --version 2>&1 | grep -m1 version || true)); OMP_WAIT_POLICY=$OMP_WAIT_POLICY"
echo "draft model: ${DRAFT:-none}"

# measure KIND NAME WORKLOAD ROUND: one streamed completion; appends a line
# to $RAW.
measure() {
	python3 - "$@" "http://127.0.0.1:$PORT" "$MAX_TOKENS" engine/spec_bench_test.go >>"$RAW" <<'EOF'
import http.client, json, re, sys, time
kind, name, workload, rnd, url, max_tokens, src = sys.argv[1:8]
go = open(src).read()
texts = {"edit": re.search(r"const benchEditText = `(.*?)`", go, re.S).group(1),
         "json": re.search(r"const benchJSONText = `(.*?)`", go, re.S).group(1),
         "free": re.search(r'const benchFreeText = "(.*?)"\n', go).group(1)}
chat = workload.endswith("-chat")
prompt = texts[workload.removesuffix("-chat")]
if chat:
    # the request alone: the answer is the model's, not primed
    prompt = prompt.split("\n\nHere is")[0]
host = url.split("//")[1]

def spec_counts():
    if kind != "sluice":
        return None
    c = http.client.HTTPConnection(host, timeout=60)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    got = {}
    for key in ("num_draft_tokens_total", "num_accepted_tokens_total"):
        m = re.search(r"^sluice_spec_decode_%s(?:\{[^}]*\})? (\S+)$" % key, text, re.M)
        got[key] = float(m.group(1)) if m else 0.0
    return got

before = spec_counts()
body = {"max_tokens": int(max_tokens), "temperature": 0, "ignore_eos": True,
        "stream": True, "stream_options": {"include_usage": True}}
if chat:
    body["messages"] = [{"role": "user", "content": prompt}]
else:
    body["prompt"] = prompt
c = http.client.HTTPConnection(host, timeout=300)
c.request("POST", "/v1/chat/completions" if chat else "/v1/completions", json.dumps(body),
          {"Content-Type": "application/json"})
r = c.getresponse()
if r.status != 200:
    sys.exit("%s %s: HTTP %d %s" % (name, workload, r.status, r.read()[:300]))
first = last = None
usage = timings = None
text = []
for raw in r:
    line = raw.decode().strip()
    if not line.startswith("data: ") or line == "data: [DONE]":
        continue
    ev = json.loads(line[6:])
    now = time.perf_counter()
    for ch in ev.get("choices") or []:
        piece = (ch.get("delta") or {}).get("content") if chat else ch.get("text")
        if piece:
            text.append(piece)
            first = first or now
            last = now
    usage = ev.get("usage") or usage
    timings = ev.get("timings") or timings
n = (usage or {}).get("completion_tokens") or (timings or {}).get("predicted_n")
if not n or first is None or last <= first:
    sys.exit("%s %s: no usable stream (tokens %r)" % (name, workload, n))
tps = (n - 1) / (last - first)
drafted = accepted = float("nan")
if kind == "sluice":
    after = spec_counts()
    drafted = after["num_draft_tokens_total"] - before["num_draft_tokens_total"]
    accepted = after["num_accepted_tokens_total"] - before["num_accepted_tokens_total"]
elif timings and "draft_n" in timings:
    drafted, accepted = timings["draft_n"], timings.get("draft_n_accepted", 0)
load = open("/proc/loadavg").read().split()[0]
print("\t".join(map(str, [rnd, name, workload, n, "%.2f" % tps, drafted, accepted, load,
                          json.dumps("".join(text)[:60])])))
EOF
}

servers=(sluice sluice-ngram llama)
BASELINE=${BASELINE:-}
if [[ -n $BASELINE ]]; then
	[[ -x $BASELINE ]] || {
		echo "baseline build $BASELINE is missing" >&2
		exit 2
	}
	# a build from a git worktree carries no vcs stamp: say which it is
	rev=$(go version -m "$BASELINE" 2>/dev/null | awk '$1 == "build" && $2 ~ /^vcs.revision=/ {print substr($2, 14, 7)}' || true)
	echo "baseline: $BASELINE (vcs.revision ${rev:-not stamped})"
	servers+=(base base-ngram)
fi
for t in $SPEC_TYPES; do
	servers+=("llama-$t")
done
if [[ -n $DRAFT ]]; then
	[[ -f $DRAFT ]] || {
		echo "draft model $DRAFT is missing" >&2
		exit 2
	}
	servers+=(sluice-draft llama-draft)
fi

template=() ltemplate=()
if [[ -n $CHAT_TEMPLATE ]]; then
	template=(--chat-template "$CHAT_TEMPLATE")
	# v0.5.0 reads --chat-template as Jinja source unless --no-jinja (with
	# it on, "gemma" was the whole prompt: 3 tokens)
	ltemplate=(--no-jinja --chat-template "$CHAT_TEMPLATE")
fi
start() { # NAME
	case $1 in
	sluice) start_sluice "$PORT" spec-sluice "${template[@]}" ;;
	sluice-ngram) start_sluice "$PORT" spec-sluice-ngram --speculate ngram "${template[@]}" ;;
	sluice-draft) start_sluice "$PORT" spec-sluice-draft --draft-model "$DRAFT" "${template[@]}" ;;
	base) SLUICE=$BASELINE start_sluice "$PORT" spec-base "${template[@]}" ;;
	base-ngram) SLUICE=$BASELINE start_sluice "$PORT" spec-base-ngram --speculate ngram "${template[@]}" ;;
	llama) start_llama "$PORT" spec-llama "${ltemplate[@]}" ;;
	llama-draft) start_llama "$PORT" spec-llama-draft --model-draft "$DRAFT" --spec-type draft-simple "${ltemplate[@]}" ;;
	llama-*) start_llama "$PORT" "spec-$1" --spec-type "${1#llama-}" "${ltemplate[@]}" ;;
	esac
}

printf 'round\tserver\tworkload\ttokens\ttok/s\tdrafted\taccepted\tload1\ttext\n' >"$RAW"
for ((r = 0; r < ROUNDS; r++)); do
	echo "round $((r + 1))/$ROUNDS, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	n=${#servers[@]}
	nw=${#WORKLOADS[@]}
	# Servers innermost: a workload's requests to the servers run one after
	# another, seconds apart, so a ratio compares like minutes on a VM
	# whose speed moves by half within minutes (session 10: one server's
	# edit requests ran 138-164 tok/s in one round and 252-275 in the next).
	for ((j = 0; j < nw; j++)); do
		w=${WORKLOADS[$(((j + r) % nw))]}
		for ((q = 0; q < REQUESTS; q++)); do
			for ((i = 0; i < n; i++)); do
				s=${servers[$(((i + r + q) % n))]} # each server takes each place in turn
				kind=llama
				[[ $s == sluice* || $s == base* ]] && kind=sluice
				cool_down
				if ! start "$s"; then
					echo "$s did not start (see $LOGS/spec-$s.log); left out of round $((r + 1))" >&2
					continue
				fi
				warm "http://127.0.0.1:$PORT"
				measure "$kind" "$s" "$w" "$((r + 1))" || echo "$s $w failed" >&2
				stop_server "$SERVER_PID"
			done
		done
	done
done

python3 - "$RAW" "${WORKLOADS[*]}" "${servers[@]}" <<'EOF'
import csv, math, statistics, sys
path, workloads, servers = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
rows = list(csv.DictReader(open(path), delimiter="\t"))
def pick(s, w, key):
    return [float(r[key]) for r in rows if r["server"] == s and r["workload"] == w]
def ratios(s, base, w):
    # per round, so each ratio compares servers that ran minutes apart
    by = {}
    for r in rows:
        if r["workload"] == w and r["server"] in (s, base):
            by.setdefault(r["round"], {}).setdefault(r["server"], []).append(float(r["tok/s"]))
    med = statistics.median
    v = [med(d[s]) / med(d[base]) for d in by.values() if s in d and base in d]
    return statistics.median(v) if v else math.nan
loads = [float(r["load1"]) for r in rows]
print("\n%d rounds; load average (1 min) during the requests: min %.2f, median %.2f, max %.2f" %
      (len({r["round"] for r in rows}), min(loads), statistics.median(loads), max(loads)))
print("decode tok/s: client-side, first streamed token to last; medians over all requests; ratios: medians over rounds of the ratio of per-round medians\n")
mine = [s for s in ("sluice-ngram", "sluice-draft") if s in servers]
print("| workload | server | tok/s | × sluice | %s | accepted / drafted | drafted / token |" % " | ".join("%s × it" % m for m in mine))
print("|---|---|---:|---:|%s---:|---:|" % ("---:|" * len(mine)))
for w in workloads:
    for s in servers:
        tps = pick(s, w, "tok/s")
        if not tps:
            print("| %s | %s | failed | |%s | |" % (w, s, " |" * len(mine)))
            continue
        d, a, n = sum(pick(s, w, "drafted")), sum(pick(s, w, "accepted")), sum(pick(s, w, "tokens"))
        acc = "%.2f (%d / %d)" % (a / d, a, d) if d > 0 else ("0 drafted" if d == 0 else "not reported")
        per = "%.2f" % (d / n) if not math.isnan(d) else ""
        print("| %s | %s | %.1f | %.2f | %s | %s | %s |" % (w, s, statistics.median(tps), ratios(s, "sluice", w),
              " | ".join("%.2f" % ratios(m, s, w) for m in mine), acc, per))
if "base" in servers:
    print("\nspeculation over its own build's plain decode (medians over rounds):\n")
    print("| workload | this build: sluice-ngram × sluice | baseline: base-ngram × base | base × sluice |")
    print("|---|---:|---:|---:|")
    for w in workloads:
        print("| %s | %.2f | %.2f | %.2f |" % (w, ratios("sluice-ngram", "sluice", w), ratios("base-ngram", "base", w),
              ratios("base", "sluice", w)))
EOF
