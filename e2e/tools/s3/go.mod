// Module s3 pins the S3-compatible server the fleet e2e suite keeps the
// programme's store on: gofakes3's own command (in-memory backend, Content-MD5
// checked, conditional puts with If-None-Match).
module github.com/gpufleet/upgrade-plugins/e2e/tools/s3

go 1.26

tool github.com/johannesboyne/gofakes3/cmd/gofakes3

require (
	github.com/johannesboyne/gofakes3 v1.2.0 // indirect
	github.com/ryszard/goskiplist v0.0.0-20150312221310-2dfbae5fcf46 // indirect
	github.com/spf13/afero v1.2.1 // indirect
	go.etcd.io/bbolt v1.3.5 // indirect
	go.shabbyrobe.org/gocovmerge v0.0.0-20230507111327-fa4f82cfbf4d // indirect
	golang.org/x/sys v0.7.0 // indirect
	golang.org/x/text v0.9.0 // indirect
	golang.org/x/tools v0.8.0 // indirect
	gopkg.in/check.v1 v1.0.0-20201130134442-10cb98267c6c // indirect
	gopkg.in/mgo.v2 v2.0.0-20180705113604-9856a29383ce // indirect
)
