module github.com/netloom/netloom

go 1.26.8
