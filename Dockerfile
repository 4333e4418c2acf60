# syntax=docker/dockerfile:1
#
# The installstrategy operator image. The same image runs the operator and,
# with --dump-install-strategy, the dump Jobs that write its product's
# strategy (see docs/STORE.md).
#
#   docker build -t REGISTRY/installstrategy-operator:v1.2.0 --build-arg VERSION=v1.2.0 .
#
# VERSION is the operator's own version (main.version): the version of the
# product it dumps. Empty (a development build) dumps any version asked for.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=""
WORKDIR /src
# Dependencies first, so a source change reuses the module download layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/installstrategy-operator ./cmd/installstrategy-operator && \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w" \
      -o /out/installstrategy-helm-render ./cmd/installstrategy-helm-render

# Static binary on distroless: no shell, no package manager, user 65532.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/installstrategy-operator /installstrategy-operator
# The chart renderer the operator runs beside itself for Helm sources
# (Helm's template engine kept out of the operator's process).
COPY --from=build /out/installstrategy-helm-render /installstrategy-helm-render
USER 65532:65532
ENTRYPOINT ["/installstrategy-operator"]
