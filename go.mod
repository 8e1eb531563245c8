module github.com/netloom/netloom

go 1.26.8

require (
	github.com/mattn/go-sqlite3 v1.14.53 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
