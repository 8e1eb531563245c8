# The bench scripts' results, lines "CONFIG METRIC VALUE" from interleaved
# rounds: v[CONFIG "," METRIC, i] is round i's value, metrics the metrics
# seen, median(CONFIG "," METRIC) their median. Each script adds its own END.
{ v[$1 "," $2, ++n[$1 "," $2]] = $3; metrics[$2] = 1 }
function median(k,   m, i, j, t, a) {
	m = n[k]; for (i = 1; i <= m; i++) a[i] = v[k, i]
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
