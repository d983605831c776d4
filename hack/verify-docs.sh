#!/usr/bin/env bash
# Checks the documents a user reads first, so they stay a landing page and a
# map that leads somewhere:
#
#   1. The files a user reads (README.md, the user documents docs/README.md
#      lists, the references, CHANGELOG.md, the chart's values and NOTES)
#      cite no requirement id (FR-APR06, NFR-APR01, ...) and no issue number
#      (#14, "issue 12"): those belong to the design documents and the code,
#      not to someone evaluating or operating the operator.
#   2. Every relative link of README.md, CONTRIBUTING.md and docs/**/*.md
#      resolves to a file of the work tree, and a link to a heading of a
#      Markdown file (file.md#heading, or #heading) to a heading that exists
#      there (GitHub's anchor rules, ASCII letters only). A moved or renamed
#      document otherwise leaves dead links behind without anyone noticing.
#   3. The README shows the command .ci/run runs: CI runs exactly what the
#      README tells a user to run, and the two must not drift apart.
#   5. Go comments carry the invariant, not history or essays
#      (docs/design/comments.md, hack/commentcheck), in every Go file of the
#      module: no pointer at the design document outside the repository, no
#      issue reference, and no comment block over 15 lines outside tests and
#      generated files.
#
# PENDING lists documents other changes are writing at the same time: a link
# to one of them may point at a missing file until it lands (a note is
# printed). Remove an entry once its file is committed; its links are then
# checked like any other.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "${root}"

PENDING=(
)

fail=0
err() {
	echo "verify-docs: $*" >&2
	fail=1
}

# 1. No requirement ids or issue numbers where users read.
# The user documents are the ones docs/README.md links before its design part.
user_docs=(README.md docs/README.md charts/projection-recovery/values.yaml
	charts/projection-recovery/values-auto-recovery-local.yaml charts/projection-recovery/templates/NOTES.txt)
mapfile -t -O "${#user_docs[@]}" user_docs < <(sed -n '/^## For contributors/q; p' docs/README.md |
	grep -oE '\]\([^)#]+\.md' | sed -E 's/^\]\(//; s|^|docs/|' | sed -E 's|docs/\.\./||' | sort -u)
((${#user_docs[@]} > 10)) || err "docs/README.md lists too few user documents (${#user_docs[@]}): is its '## For contributors' heading there?"
for f in "${user_docs[@]}"; do
	[[ -f ${f} ]] || { err "${f} is missing"; continue; }
	while IFS= read -r hit; do
		err "${f}:${hit}: a requirement id or issue number (keep them in the design documents)"
	done < <(grep -nE '\bN?FR-[A-Z]+[0-9]*\b|\bNFR-|\b[Ii]ssues? #?[0-9]+|(^|[^[:alnum:]&/_-])#[0-9]+\b' "${f}" || true)
done

# links FILE prints "LINE<TAB>TARGET" for every Markdown link of FILE outside
# fenced code blocks and inline code: inline [text](target), images, and
# reference definitions [label]: target.
links() {
	awk '
		/^[ \t]*(```|~~~)/ { fence = !fence; next }
		fence { next }
		{
			line = $0
			gsub(/`[^`]*`/, "", line)
			if (match(line, /^[ \t]*\[[^]]+\]:[ \t]*/)) {
				t = substr(line, RLENGTH + 1); sub(/[ \t].*/, "", t)
				print NR "\t" t
				next
			}
			while (match(line, /\]\([^)]*\)/)) {
				t = substr(line, RSTART + 2, RLENGTH - 3)
				sub(/^[ \t]*</, "", t); sub(/>[ \t]*$/, "", t); sub(/[ \t].*/, "", t)
				print NR "\t" t
				line = substr(line, RSTART + RLENGTH)
			}
		}' "$1"
}

# anchors FILE prints the anchor of every ATX heading of FILE outside fenced
# code, as GitHub makes it: the heading text without inline markup,
# lower-cased, with everything but letters, digits, spaces, "_" and "-"
# removed, spaces as "-", and "-1", "-2"... appended to repeats.
anchors() {
	awk '
		/^[ \t]*(```|~~~)/ { fence = !fence; next }
		fence { next }
		/^#+[ \t]/ {
			# mawk has no {1,6}: at most six "#" make a heading.
			if (match($0, /^#+/) && RLENGTH > 6) next
			h = $0
			sub(/^#+[ \t]+/, "", h); sub(/[ \t]+#+[ \t]*$/, "", h); sub(/[ \t]+$/, "", h)
			while (match(h, /\[[^]]*\]\([^)]*\)/)) {
				txt = substr(h, RSTART + 1); sub(/\]\(.*/, "", txt)
				h = substr(h, 1, RSTART - 1) txt substr(h, RSTART + RLENGTH)
			}
			h = tolower(h)
			gsub(/[^a-z0-9 _-]/, "", h)
			gsub(/ /, "-", h)
			a = h
			if (h in seen) a = h "-" seen[h]
			seen[h]++
			print a
		}' "$1"
}

is_pending() {
	local p
	for p in "${PENDING[@]}"; do
		[[ $1 == "${p}" ]] && return 0
	done
	return 1
}

# 2. Every relative link resolves.
mapfile -t docs < <({ echo README.md; echo CONTRIBUTING.md; find docs -name '*.md'; } | sort -u)
checked=0 pending=0
declare -A noted=()
for f in "${docs[@]}"; do
	[[ -f ${f} ]] || { err "${f} is missing"; continue; }
	dir="$(dirname "${f}")"
	while IFS=$'\t' read -r line target; do
		[[ -n ${target} ]] || continue
		# Absolute URLs (http:, https:, mailto:...) are not this check's business.
		[[ ${target} =~ ^[A-Za-z][A-Za-z0-9+.-]*: ]] && continue
		checked=$((checked + 1))
		path="${target%%#*}"
		anchor=""
		[[ ${target} == *"#"* ]] && anchor="${target#*#}"
		if [[ -z ${path} ]]; then
			resolved="${f}"
		else
			resolved="$(realpath -m --relative-to="${root}" "${dir}/${path}")"
		fi
		if [[ ! -e ${resolved} ]]; then
			if is_pending "${resolved}"; then
				pending=$((pending + 1))
				if [[ -z ${noted[${resolved}]:-} ]]; then
					echo "verify-docs: note: ${resolved} is not there yet (listed in PENDING)"
					noted[${resolved}]=1
				fi
				continue
			fi
			err "${f}:${line}: link ${target} leads to ${resolved}, which does not exist"
			continue
		fi
		if [[ -n ${anchor} && ${resolved} == *.md && -f ${resolved} ]]; then
			if ! anchors "${resolved}" | grep -qxF -- "${anchor}"; then
				err "${f}:${line}: link ${target}: ${resolved} has no heading with anchor #${anchor}"
			fi
		fi
	done < <(links "${f}")
done

# 3. The README shows the command CI runs.
ci_cmd="$(grep -vE '^[[:space:]]*(#|$|set |cd )' .ci/run | tail -n 1 | sed -E 's/[[:space:]]+$//')"
if [[ -z ${ci_cmd} ]]; then
	err ".ci/run runs no command"
elif ! grep -qE "^$(printf '%s' "${ci_cmd}" | sed -E 's/[][\.*^$+?(){}|/]/\\&/g')([[:space:]]|$)" README.md; then
	err "README.md does not show '${ci_cmd}', the command .ci/run runs"
fi

# 4. The install guide's marked blocks are what make e2e runs: each block of
# docs/install.md marked `<!-- e2e: NAME -->` is run by hack/e2e.sh or the
# files it sources (`guide NAME`), each block of docs/database-role.md marked
# the same way by `role_sql NAME`, and a block README.md marks is the
# guide's, byte for byte.
block() { awk -v m="<!-- e2e: $2 -->" '$0 == m { f = 1; next } f && /^```/ { if (++n == 2) exit; next } f && n == 1 { print }' "$1"; }
e2e_scripts=(hack/e2e.sh hack/e2e/*.sh)
guide_blocks=0
for name in $(sed -nE 's/^<!-- e2e: ([a-z0-9-]+) -->$/\1/p' docs/install.md); do
	guide_blocks=$((guide_blocks + 1))
	[[ -n "$(block docs/install.md "${name}")" ]] || err "docs/install.md: the block marked e2e: ${name} is empty or not a fenced block"
	grep -qE "^[[:space:]]*(E2E_AS=[a-z]+ )?guide ${name}( |$)" "${e2e_scripts[@]}" || err "docs/install.md: hack/e2e.sh never runs the block marked e2e: ${name}"
done
role_blocks=0
for name in $(sed -nE 's/^<!-- e2e: ([a-z0-9-]+) -->$/\1/p' docs/database-role.md); do
	role_blocks=$((role_blocks + 1))
	[[ -n "$(block docs/database-role.md "${name}")" ]] || err "docs/database-role.md: the block marked e2e: ${name} is empty or not a fenced block"
	grep -qE "^[[:space:]]*role_sql ${name} " "${e2e_scripts[@]}" || err "docs/database-role.md: hack/e2e.sh never runs the block marked e2e: ${name}"
done
for name in $(sed -nE 's/^<!-- e2e: ([a-z0-9-]+) -->$/\1/p' README.md); do
	[[ "$(block README.md "${name}")" == "$(block docs/install.md "${name}")" ]] ||
		err "README.md: the block marked e2e: ${name} differs from docs/install.md's, which make e2e runs"
done
((guide_blocks > 0)) || err "docs/install.md marks no block for make e2e"

# 5. Comments state invariants; reasoning, figures and history live in docs/.
# The whole module: commentcheck skips vendor, testdata, hidden directories
# and other modules, and exempts generated files from the length rule.
COMMENT_CHECKED=(.)
go run ./hack/commentcheck "${COMMENT_CHECKED[@]}" || fail=1

if [[ ${fail} -ne 0 ]]; then exit 1; fi
echo "verify-docs: the module's Go comments hold no issue reference or essay, none points outside the repository;"
echo "verify-docs: ${guide_blocks} install guide blocks and ${role_blocks} database-role blocks run by make e2e; ${#docs[@]} documents, $((checked - pending)) relative links resolve (${pending} to PENDING documents); ${#user_docs[@]} user-facing files cite no requirement id or issue number; README.md shows '${ci_cmd}' as .ci/run runs it"
