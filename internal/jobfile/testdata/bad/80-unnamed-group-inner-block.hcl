job "j" {
  group {
    restart { mod = "fail" }
  }
}
