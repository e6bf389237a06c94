module dlockbench

go 1.21

require github.com/dlock/dlock v0.0.0

replace github.com/dlock/dlock => ../..
