package main

import "github.com/urfave/cli/v2"

// placeholder until the doctor stage lands
var doctorCommand = &cli.Command{Name: "doctor"}
