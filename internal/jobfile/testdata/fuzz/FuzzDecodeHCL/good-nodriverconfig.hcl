go test fuzz v1
[]byte("job \"tiny\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"exec\"\n      config {\n        command = \"/bin/true\"\n      }\n    }\n  }\n}\n")
