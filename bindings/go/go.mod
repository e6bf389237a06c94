module github.com/dlock/dlock-go

go 1.21
