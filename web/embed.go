// Package web holds the built web UI (web/dist, made by `npm run build`,
// which `make build` runs) embedded into the netloom binary. The sources
// are TypeScript under src/; see README.md.
package web

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// Dist is the built UI: index.html and its assets. It holds only
// .gitkeep when the UI was not built.
func Dist() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // "dist" is embedded above: cannot happen
	}
	return sub
}
