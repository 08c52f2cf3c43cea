package main

import "github.com/urfave/cli/v2"

// placeholder until the images stage lands
var imagesCommand = &cli.Command{Name: "images"}
