# first.sh's summary: what each stage's log says, the verdict, and the two
# files besides it. Sourced by first.sh; uses its ORDER, STATUS, TOOK,
# CURRENT, WORK, OUT, BUDGET and t0.

# tests LOG: top-level test verdict counts of a go test -test.v log.
tests() {
	local pass fail
	pass=$(grep -cE '^--- PASS' "$1")
	fail=$(grep -cE '^--- FAIL' "$1")
	echo "tests: $pass passed, $fail failed"
}

# first_bad LOG: the test that hung (the last one started and never ended),
# else the first that failed; top-level names only.
first_bad() {
	local t
	t=$(grep -E '^=== (RUN|CONT) ' "$1" | awk '{print $3}' | sed 's,/.*,,' | tail -n 1)
	if [ -n "$t" ] && ! grep -qE "^--- (PASS|FAIL|SKIP): $t " "$1"; then
		echo "$t"
		return
	fi
	grep -E '^--- FAIL: ' "$1" | awk '{print $3}' | head -n 1
}

# dump LOG: what a goroutine dump says about where the process was: our
# frames, outermost last, the test's own and the kernel calls among them.
dump() {
	grep -q '^goroutine [0-9]' "$1" || return 0
	echo "goroutine dump ($(grep -c '^goroutine [0-9]' "$1") goroutines); our frames:"
	grep -E '^github\.com/sluicehq/sluice/[^ ]*\(' "$1" | sed -E 's/\([^()]*\)$//' | awk '!seen[$0]++' | head -n 12 | sed 's/^/  /'
}

# excerpt NAME: what the summary keeps of a finished stage.
excerpt() {
	local f=$WORK/$1.log
	case $1 in
	env) grep -E '^(GPU|driver|python|torch|glibc|ldd)' "$f" ;;
	cublas) grep -E '^cublas' "$f" ;;
	jit) # the first backend loads the prebuilt sm_90 cubins, or JIT-compiles the
		# PTX into an empty driver cache; a process's later backends load its
		# cached images (each JIT line says where its modules came from)
		grep -E '^\s+\S+_test\.go:[0-9]+: (JIT|GEMM path|module )' "$f" | sed -E 's/^\s+\S+_test\.go:[0-9]+: //' |
			awk '/^JIT/ {n++; $0 = (n == 1 ? "cold " : "warm ") $0} {print}' ;;
	bandwidth) grep -E 'GB/s|floor' "$f" ;;
	bench | benchmma)
		if [ -s "$WORK/$1.md" ]; then
			head -n 1 "$WORK/$1.md"
			grep -E '^\|' "$WORK/$1.md"
		else
			echo "no table written"
		fi
		grep -E '^\s*--- FAIL|^\s*[a-z_]+_test\.go:[0-9]+: .*(rror|fail)' "$f" | head -n 8
		dump "$f" ;;
	diagnose)
		echo "rerun alone with SLUICE_CUDA_TRACE=1: $(cat "$WORK/diagnose.what" 2>/dev/null)"
		echo "last kernel launched: $(grep -E '^cuda trace:' "$f" | tail -n 1 | sed 's/^cuda trace: //')"
		grep -E 'cuda backend: kernel|LaunchError|panic:' "$f" | head -n 6
		tests "$f"
		dump "$f" ;;
	*)
		tests "$f"
		grep -E '^\s*--- FAIL' "$f" | head -n 12
		# what a failing test printed before its verdict
		grep -E -B 6 '^\s*--- FAIL' "$f" | grep -vE '^\s*(=== |--- |--$)' | head -n 24
		grep -E 'greedy agreement|real model' "$f" | sed -E 's/^\s+\S+_test\.go:[0-9]+: //' | head -n 6
		local t
		t=$(first_bad "$f")
		[[ ${STATUS[$1]} == TIMEOUT* ]] && echo "hung in: ${t:-no test started}"
		dump "$f" ;;
	esac | cut -c 1-240 | head -n 40
}

# row FILE BATCH: decode tok/s and fraction of the floor of a bench table's
# row labelled BATCH ("1", "256 (graphs)").
row() {
	awk -F'|' -v b="$2" '{l=$2; gsub(/^ +| +$/, "", l)} l == b {gsub(/ /, "", $5); gsub(/ /, "", $7); print $5 " tok/s" ($7 != "–" ? " (" $7 " of the floor)" : ""); exit}' "$1" 2>/dev/null
}

# kernel STAGE: the kernel the diagnosis saw launched last, when it reran
# STAGE's test.
kernel() {
	local k
	[[ -f $WORK/diagnose.log && $(cat "$WORK/diagnose.what" 2>/dev/null) == "$1 "* ]] || return 0
	k=$(grep -E '^cuda trace:' "$WORK/diagnose.log" | tail -n 1 | awk '{print $5}')
	[ -n "$k" ] && echo " (last kernel launched: $k)"
}

# verdict: one line, the run's outcome so far.
verdict() {
	if [ -n "$CURRENT" ]; then
		echo "VERDICT: INCOMPLETE — the run stopped during $CURRENT (+$((SECONDS - t0))s of ${BUDGET}s); earlier stages above"
		return
	fi
	local s bad="" skipped="" perf=""
	for s in jit ops model; do
		case ${STATUS[$s]} in
		ok) ;;
		TIMEOUT*) bad+="${bad:+; }$s hung in $(first_bad "$WORK/$s.log")$(kernel "$s")" ;;
		FAIL*)
			local names
			names=$(grep -E '^--- FAIL: ' "$WORK/$s.log" | awk '{print $3}' | head -n 4 | tr '\n' ' ' | sed 's/ $//')
			bad+="${bad:+; }$s failed${names:+: $names}$(kernel "$s")" ;;
		*) skipped+="${skipped:+, }$s ${STATUS[$s]%% *}" ;;
		esac
	done
	local b1 b1g b256 b256g mma
	b1=$(row "$WORK/bench.md" 1)
	b1g=$(row "$WORK/bench.md" "1 (graphs)")
	b256=$(row "$WORK/bench.md" 256)
	b256g=$(row "$WORK/bench.md" "256 (graphs)")
	mma=$(row "$WORK/benchmma.md" "256 (graphs)")
	[ -n "$b1$b1g" ] && perf+="; batch 1: ${b1:-?}, graphs ${b1g:-?}"
	[ -n "$b256$b256g" ] && perf+="; batch 256: ${b256:-?}, graphs ${b256g:-?}"
	[ -n "$mma" ] && perf+="; 256 without cuBLAS: $mma"
	[ -z "$perf" ] && perf="; no bench figures (bench ${STATUS[bench]%% *})"
	# no cuBLAS is no fault of the kernels, but the 256-row figures are then the mma kernels'
	[[ ${STATUS[cublas]} == FAIL* ]] && perf+="; no cuBLAS found"
	[[ ${STATUS[cublas]} == TIMEOUT* ]] && perf+="; cuBLAS lookup timed out"
	if [ -n "$bad" ]; then
		echo "VERDICT: FAIL — $bad$perf"
	elif [ -n "$skipped" ]; then
		echo "VERDICT: INCOMPLETE — $skipped$perf"
	else
		echo "VERDICT: PASS — ops and models match the CPU backend$perf"
	fi
}

write_summary() {
	local s
	{
		echo "# Sluice CUDA backend, first contact — $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo
		verdict
		echo
		echo "Budget ${BUDGET}s, +$((SECONDS - t0))s so far. Every log in full: logs.tgz; tables: bench.md."
		echo
		echo "| stage | result | time |"
		echo "|---|---|---:|"
		for s in "${ORDER[@]}"; do
			echo "| $s | ${STATUS[$s]} | ${TOOK[$s]:-} |"
		done
		for s in "${ORDER[@]}"; do
			[ -s "$WORK/$s.note" ] || continue
			printf '\n## %s: %s\n\n' "$s" "${STATUS[$s]}"
			sed 's/^/    /' "$WORK/$s.note"
		done
		echo
		verdict
	} >"$OUT/summary.md.part" && mv -f "$OUT/summary.md.part" "$OUT/summary.md"
}

pack_logs() {
	tar -czf "$OUT/logs.tgz.part" -C "$WORK" . 2>/dev/null && mv -f "$OUT/logs.tgz.part" "$OUT/logs.tgz"
}

write_bench() {
	local s
	for s in bench benchmma; do
		[ -s "$WORK/$s.md" ] || continue
		printf '## %s: %s\n\n' "$s" "${STATUS[$s]}"
		cat "$WORK/$s.md"
		echo
	done >"$OUT/bench.md.part" && mv -f "$OUT/bench.md.part" "$OUT/bench.md"
}
