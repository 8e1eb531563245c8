package api

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
)

// UI serves the single-page web UI from fsys (web.Dist()): files that
// exist as themselves, index.html for every other path so the client-side
// router can show /network, /links/{id}, /nodes/{node}…. Files under
// assets/ have content hashes in their names and are cached for good;
// text files are gzip-compressed once, on first request. Without a build
// (no index.html) it answers every page with a note on how to build.
func UI(fsys fs.FS) http.Handler {
	return &uiHandler{fsys: fsys}
}

type uiHandler struct {
	fsys  fs.FS
	cache sync.Map // name -> *uiFile
}

type uiFile struct {
	body, gz []byte
	ctype    string
}

const uiNotBuilt = `<!doctype html><meta charset="utf-8"><title>Netloom: UI not built</title>
<body>
<h1>The web UI is not built</h1>
<p>This netloom binary was built without the web UI. Run <code>make build</code>
(which runs <code>npm ci &amp;&amp; npm run build</code> in <code>web/</code> and then embeds
<code>web/dist</code>), then restart <code>netloom serve</code>.</p>
<p>The JSON API works regardless: <a href="/api/v1/status">/api/v1/status</a>.</p>
`

func (u *uiHandler) file(name string) (*uiFile, error) {
	if f, ok := u.cache.Load(name); ok {
		return f.(*uiFile), nil
	}
	body, err := fs.ReadFile(u.fsys, name)
	if err != nil {
		return nil, fmt.Errorf("ui file %s: %w", name, err)
	}
	f := &uiFile{body: body, ctype: mime.TypeByExtension(path.Ext(name))}
	if f.ctype == "" {
		f.ctype = http.DetectContentType(body)
	}
	if len(body) > 1024 && (strings.HasPrefix(f.ctype, "text/") || strings.Contains(f.ctype, "javascript") || strings.Contains(f.ctype, "json") || strings.Contains(f.ctype, "svg")) {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		_, _ = zw.Write(body)
		if zw.Close() == nil {
			f.gz = b.Bytes()
		}
	}
	u.cache.Store(name, f)
	return f, nil
}

func (u *uiHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	immutable := strings.HasPrefix(name, "assets/")
	f, err := u.file(name)
	if name == "" || err != nil {
		if immutable {
			http.NotFound(w, r)
			return
		}
		if f, err = u.file("index.html"); err != nil {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(uiNotBuilt))
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", f.ctype)
	h.Set("Vary", "Accept-Encoding")
	h.Set("X-Content-Type-Options", "nosniff")
	if immutable {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	body := f.body
	if f.gz != nil && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		h.Set("Content-Encoding", "gzip")
		body = f.gz
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
}
