# coverpkgs.awk summarises a Go coverage profile per package: statements covered / statements, each
# block counted once (a block listed twice, by several test binaries, is covered if either run hit it).
NR > 1 {
	split($1, fr, ":"); f = fr[1]; pkg = f; sub(/\/[^\/]*$/, "", pkg)
	if (!($1 in st)) { st[$1] = $2; p[$1] = pkg }
	if ($3 > 0) hit[$1] = 1
}
END {
	for (b in st) { tot[p[b]] += st[b]; if (b in hit) cov[p[b]] += st[b] }
	for (k in tot) printf "%-72s %5.1f%%  %5d/%d\n", k, 100 * cov[k] / tot[k], cov[k], tot[k] | "sort"
}
