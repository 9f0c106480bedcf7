jobb "web" {
  group "api" {}
}
