#!/usr/bin/env bash
# nomad-corpus.sh DIR [DROVER]: measure how many Nomad job files in DIR
# drover takes unmodified (docs/nomad.md, "Measuring with Nomad's own
# files").
#
# For each *.nomad, *.hcl and *.json file of DIR that is a job file (it has
# a job block, or a "Job" object):
#   1. its drivers: a file with a driver drover lacks is counted apart;
#   2. `drover validate`: valid, or refused by its first error, whose cause
#      is printed with names and numbers blanked so that alike causes count
#      together;
#   3. a valid file whose tasks are all exec or raw_exec, whose commands
#      exist on this machine and that fetches nothing from the internet
#      (no http(s) or git artifact) is run on a fresh `drover dev`:
#      `drover run --timeout 60s` exit 0 means every instance runs, or a
#      batch job completed; the job is purged after.
#   4. of those, a file whose task runs a shell (sh, bash, dash, ...) with
#      a -c script that calls a command this machine lacks is run too, but
#      named and counted apart: the last lines give the figure with the
#      task's command checked only, and without those files. A script's
#      commands are the first word of each simple command (split on ; & |
#      ( ) { } backquotes and newlines, after quoted strings, ${...},
#      $((...)) and [[...]] are taken out); bash's `command -v` decides
#      whether the machine has one (builtins and keywords count). Anything
#      not read with certainty counts as present: a word with a quote, $,
#      a glob or an assignment, a relative path, a name the script defines
#      as a function, and a whole script with a heredoc, a case or a
#      nested (( )).
# DROVER is the drover binary (default: built from this checkout into a
# temporary directory). Nothing is sent anywhere but the local drover dev.
set -euo pipefail

dir=${1:?usage: nomad-corpus.sh DIR [DROVER]}
work=$(mktemp -d "${TMPDIR:-/tmp}/nomad-corpus.XXXXXX")
chmod 0711 "$work"
dev_pid=
cleanup() {
	if [[ -n $dev_pid ]]; then
		kill "$dev_pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$dev_pid" 2>/dev/null || break; sleep 0.2; done
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# shell_scripts FILE: the -c script of each config block of FILE whose
# command is a shell, each ended by a NUL. An args list jq cannot read
# (HCL that is not also JSON) gives nothing: its script counts as fine.
shell_scripts() {
	awk '
		function flush() {
			if (inblock && cmd ~ /(^|\/)(ba|da|z|k|a|mk)?sh$/ && args != "") {
				sub(/^[^=]*=[[:space:]]*/, "", args)
				sub(/,[[:space:]]*\][[:space:]]*$/, "]", args)
				print args
			}
			inblock = 0; cmd = ""; args = ""; collecting = 0
		}
		collecting {
			line = $0
			if (line ~ /^[[:space:]]*(#|\/\/)/) next
			buf = buf " " line
			if (line ~ /\][[:space:]]*$/) { collecting = 0; args = buf }
			next
		}
		/^[[:space:]]*config[[:space:]]*\{/ { flush(); inblock = 1; next }
		/^[[:space:]]*[a-z_]+([[:space:]]+"[^"]*")*[[:space:]]*\{[[:space:]]*$/ { flush(); next }
		inblock && /^[[:space:]]*command[[:space:]]*=[[:space:]]*"/ {
			cmd = $0; sub(/^[^"]*"/, "", cmd); sub(/".*$/, "", cmd); next
		}
		inblock && /^[[:space:]]*args[[:space:]]*=[[:space:]]*\[/ {
			buf = $0
			if ($0 ~ /\][[:space:]]*$/) args = buf; else collecting = 1
			next
		}
		END { flush() }
	' "$1" | while IFS= read -r list; do
		jq -j '. as $a | first(range(length) | select(($a[.] | type) == "string" and ($a[.] | test("^-[a-zA-Z]*c[a-zA-Z]*$")))) as $i
			| ($a[$i + 1] // empty) | strings | . + "\u0000"' <<<"$list" 2>/dev/null || true
	done
}

# script_missing SCRIPT: the first command SCRIPT runs that this machine
# lacks, or nothing (see step 4 above).
script_missing() {
	local s=$1 seg w defined=" "
	local heredoc='(^|[^<])<<[^<]' hascase='(^|[^[:alnum:]_])case[[:space:]]'
	local assign='^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=' redir='^[0-9]*(>>?|<)$' word='^[A-Za-z_./][A-Za-z0-9_./+-]*$'
	# A heredoc's lines, a case's patterns: not read here.
	if [[ $s =~ $heredoc || $s =~ $hascase ]]; then
		return
	fi
	# Functions the script defines.
	while read -r w; do defined+="$w "; done < <(grep -oE '(^|[^[:alnum:]_])(function[[:space:]]+)?[A-Za-z_][A-Za-z0-9_-]*[[:space:]]*\(\)' <<<"$s" |
		sed -E 's/^[^A-Za-z_]?(function[[:space:]]+)?//; s/[[:space:]]*\(\)$//')
	# Quoted strings, ${...}, $((...)) and ((...)), [[...]] and the
	# redirections to a descriptor (2>&1) out, as one word each.
	local blank='s/'"'"'[^'"'"']*'"'"'|"([^"\\]|\\.)*"/ @Q@ /g; s/\$\{[^}]*\}/@Q@/g; s/\$?\(\([^()]*\)\)/@Q@/g; s/\[\[[^]]*\]\]/@Q@/g; s/[0-9]*(>>?|<)&[0-9-]*/ /g; s/&>>?/ >/g'
	# What follows a closing ) } or backquote continues a word: no command.
	blank+='; s/`([^`]*)`/;\1\n@C@/g; s/[)}]/\n@C@/g'
	s=$(printf '%s' "$s" | sed -zE "$blank" | tr -d '\0')
	[[ $s == *'(('* ]] && return
	while IFS= read -r seg; do
		local -a words
		read -ra words <<<"$seg"
		local i=0 n=${#words[@]}
		while ((i < n)); do
			w=${words[i]}
			case $w in
			if | then | else | elif | fi | do | done | while | until | '!' | time | coproc | exec | command | builtin | nohup | -p) i=$((i + 1)) ;;
			[0-9]*'>'* | [0-9]*'<'* | '>'* | '<'*)
				# A redirection: skip its operand too when apart.
				[[ $w =~ $redir ]] && i=$((i + 1))
				i=$((i + 1))
				;;
			*)
				if [[ $w =~ $assign ]]; then i=$((i + 1)); else break; fi
				;;
			esac
		done
		((i < n)) || continue
		w=${words[i]}
		case $w in
		for | select | function | '[[' | '((') continue ;;
		esac
		[[ $w =~ $word ]] || continue
		[[ $defined == *" $w "* ]] && continue
		if [[ $w == */* ]]; then
			[[ $w == /* && ! -x $w ]] && { echo "$w"; return; }
			continue
		fi
		env -i PATH="$PATH" bash --norc --noprofile -c 'command -v -- "$1"' _ "$w" >/dev/null || { echo "$w"; return; }
	done < <(tr ';&|({`' '\n\n\n\n\n\n' <<<"$s")
}

command -v jq >/dev/null || { echo "nomad-corpus.sh needs jq, to read a task's args (apt-get install jq)" >&2; exit 1; }
drover=${2:-}
if [[ -z $drover ]]; then
	drover=$work/drover
	(cd "$(dirname "$0")/.." && go build -o "$drover" ./cmd/drover)
fi

total=0 other_driver=0 valid=0 refused=0
runnable=() skipped_cmd=0 skipped_net=0 lacking=""
declare -A script_lacks=() # file -> the command its shell script calls that this machine lacks
: >"$work/causes"
for f in "$dir"/*.nomad "$dir"/*.hcl "$dir"/*.json; do
	[[ -f $f ]] || continue
	grep -Eq '^[[:space:]]*job[[:space:]]+"|"Job"[[:space:]]*:' "$f" || continue
	total=$((total + 1))
	drivers=$(grep -Eo '"?[Dd]river"?[[:space:]]*[=:][[:space:]]*"[^"]+"' "$f" | sed -E 's/.*"([^"]+)"$/\1/' | sort -u)
	if grep -qvxE 'exec|raw_exec|docker' <<<"$drivers"; then
		other_driver=$((other_driver + 1))
		continue
	fi
	if out=$("$drover" validate "$f" 2>&1); then
		valid=$((valid + 1))
	else
		refused=$((refused + 1))
		grep -v '^warning: ' <<<"$out" | head -1 |
			sed -E 's/^[^:]+:[0-9]+:[0-9]+: //; s/^[a-z_]+(\[[0-9]+\])?(\.[a-z_]+(\[[0-9]+\])?)*: //; s/"[^"]*"/"…"/g; s/\b[0-9]+\b/N/g; s/-var [A-Za-z_]+=VALUE/-var NAME=VALUE/; s/NOMAD_VAR_[A-Za-z_]+/NOMAD_VAR_NAME/' >>"$work/causes"
		continue
	fi
	grep -qvxE 'exec|raw_exec' <<<"$drivers" && continue
	if grep -Eq 'source[[:space:]]*=[[:space:]]*"(https?|git)[:]' "$f"; then
		skipped_net=$((skipped_net + 1))
		continue
	fi
	missing=
	while read -r c; do
		[[ -z $c ]] && continue
		if [[ $c == */* ]]; then [[ -x $c ]] || missing=$c; else command -v "$c" >/dev/null || missing=$c; fi
	done < <(grep -Eo 'command[[:space:]]*=[[:space:]]*"[^"]+"' "$f" | sed -E 's/.*"([^"]+)"$/\1/')
	if [[ -n $missing ]]; then
		skipped_cmd=$((skipped_cmd + 1))
		lacking+="  no command $(basename "$f"): $missing"$'\n'
		continue
	fi
	missing=
	while IFS= read -r -d '' script; do
		missing=$(script_missing "$script")
		[[ -n $missing ]] && break
	done < <(shell_scripts "$f")
	[[ -n $missing ]] && script_lacks[$f]=$missing
	runnable+=("$f")
done

echo "job files: $total; with a driver drover lacks: $other_driver"
base=$((total - other_driver))
echo "of the $base with drivers drover has (exec, raw_exec, docker): valid $valid ($((base ? valid * 100 / base : 0))%), refused $refused"
if [[ -s $work/causes ]]; then
	echo "refused by first error's cause:"
	sort "$work/causes" | uniq -c | sort -rn | sed 's/^/  /'
fi

echo "exec/raw_exec files not run: $skipped_net fetch from the internet, $skipped_cmd name a command this machine lacks"
printf '%s' "$lacking"
if ((${#runnable[@]} == 0)); then
	echo "runnable exec/raw_exec files: 0"
	exit 0
fi
# A task run as another user (user = "nobody") must pass through the data
# directory to reach its own.
mkdir -m 0711 "$work/data"
: >"$work/dev.out"
"$drover" dev --http-addr 127.0.0.1:0 --data-dir "$work/data" >"$work/dev.out" 2>&1 &
dev_pid=$!
for _ in $(seq 150); do
	addr=$(grep -Eo 'API at https://[^,]+' "$work/dev.out" | head -1 | cut -d' ' -f3) || true
	[[ -n $addr ]] && grep -q 'Press Ctrl-C' "$work/dev.out" && break
	sleep 0.2
done
[[ -n ${addr:-} ]] || { echo "drover dev did not start:"; cat "$work/dev.out"; exit 1; }
export DROVER_ADDR=$addr

ok=0 exited=0 other=0 script_ok=0
for f in "${runnable[@]}"; do
	name=$("$drover" validate "$f" 2>/dev/null | sed -nE 's/.* job "([^"]+)".*/\1/p')
	if "$drover" run --timeout 60s "$f" >"$work/run.out" 2>&1; then
		ok=$((ok + 1))
		[[ -n ${script_lacks[$f]:-} ]] && script_ok=$((script_ok + 1))
		echo "  ran    $(basename "$f")"
	else
		# A task that ran and exited non-zero (its program failed: a
		# command its shell lacks, a file written to fail) is told
		# apart from what kept drover from starting or placing it.
		why=$(grep -E 'Error|failed|fit' "$work/run.out" | tail -1 | cut -c1-200)
		if grep -qE '(failed|died): exit code [0-9]+' <<<"$why"; then
			exited=$((exited + 1))
			echo "  exited $(basename "$f"): $why"
		else
			other=$((other + 1))
			echo "  FAIL   $(basename "$f"): $why"
		fi
	fi
	"$drover" stop --purge "$name" >/dev/null 2>&1 || true
done
echo "runnable exec/raw_exec files: ${#runnable[@]}; running or complete: $ok ($((ok * 100 / ${#runnable[@]}))%)"
# The same files less those whose shell script calls a command this
# machine lacks (step 4).
n=$((${#runnable[@]} - ${#script_lacks[@]})) k=$((ok - script_ok))
echo "of them, ${#script_lacks[@]} run a shell script calling a command this machine lacks:"
for f in "${runnable[@]}"; do
	[[ -n ${script_lacks[$f]:-} ]] && echo "  script $(basename "$f"): ${script_lacks[$f]}"
done
echo "runnable with the scripts' commands checked too: $n; running or complete: $k ($((n ? k * 100 / n : 0))%)"
echo "not running: $exited whose task's own program exited non-zero, $other for another reason"
