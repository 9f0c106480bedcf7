go test fuzz v1
[]byte("job \"web\" {\n  priority = var.priority\n  group \"api\" {\n    count = length([\"a\", \"b\"])\n    task \"server\" {\n      driver = \"exec\"\n      config {\n        command = \"/bin/server\"\n        args    = [\"--id\", \"${NOMAD_ALLOC_ID}\"]\n      }\n    }\n  }\n}\n")
