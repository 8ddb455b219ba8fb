module github.com/go-zeromq/zmq4

go 1.26.0

require (
	golang.org/x/sync v0.23.0
	golang.org/x/text v0.42.0
)
