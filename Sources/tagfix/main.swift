import TagFixCLI

await TagFixCommandLine.main()
