package main

import "github.com/urfave/cli/v2"

// placeholder until the unpack stage lands
var unpackCommand = &cli.Command{Name: "unpack"}
